"""Needs attention at desktop widths: the Retry button is in view without scrolling sideways."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from notifications.models import NotificationDelivery
from tests.browser.conftest import log_in
from tests.helpers import finish, make_deliveries

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1280, 1440])
def test_retry_is_visible_without_scrolling_sideways(site, page, django_user_model, width):
    recipient = django_user_model.objects.create_user("reader", email="reader@example.com")
    ids = make_deliveries(recipient, 3, channel="email")
    finish(ids, status="dead")
    # What a real dead row carries: a provider's long error, with long words in it.
    NotificationDelivery.objects.filter(pk__in=ids).update(
        error_code="SMTP_UNAVAILABLE_AFTER_RETRIES",
        error_message="Connection unexpectedly closed: " + "x" * 300,
    )
    member = django_user_model.objects.create_user(
        "fixer", password="a-long-password-1", is_staff=True
    )
    for codename in ("view_needsattention", "view_notificationdelivery", "retry_delivery"):
        member.user_permissions.add(Permission.objects.get(codename=codename))

    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, site, username="fixer", password="a-long-password-1")
    page.goto(site.url + "/admin/notifications/needsattention/")
    box = page.wait_for_selector(".retry-button").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
    assert box["height"] >= 24 and box["width"] >= 44, box  # a target a hand can hit
    # Nothing wider than the window, and the list not scrolling inside its own box either.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.evaluate(
        "[...document.querySelectorAll('#result_list')].every("
        "t => t.getBoundingClientRect().right <= window.innerWidth "
        "&& t.scrollWidth <= t.parentElement.clientWidth + 1)"
    )
