"""docs/messages.md's worked example, run: an app outside the project's packages
(tests/sites/newsletter) registers a category and a message type exactly as the page shows, and
the site sends it, lists it and checks it like its own."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from django.test import modify_settings

from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, Status
from recipients import catalogue, preferences
from recipients.catalogue import Message
from recipients.checks import check_catalogue

BASE_DIR = Path(__file__).resolve().parents[2]
APP = "tests.sites.newsletter"
MODULE = f"{APP}.notifications"


@pytest.fixture
def newsletter():
    """The example app installed, as a site's settings would install it; afterwards its
    entries are unregistered and its module forgotten, so the next install registers again."""
    with modify_settings(INSTALLED_APPS={"append": APP}):
        yield
    catalogue.unregister_category("newsletter")
    catalogue.unregister_message("newsletter.issue")
    sys.modules.pop(MODULE, None)


def test_the_page_shows_the_code_the_example_app_runs():
    page = (BASE_DIR / "docs/messages.md").read_text()
    [shown] = re.findall(r"```python\n# newsletter/notifications.py\n(.*?)```", page, re.S)
    assert shown == (BASE_DIR / "tests/sites/newsletter/notifications.py").read_text()


def test_an_installed_apps_message_is_registered_in_its_name_and_renders(newsletter):
    assert catalogue.CATEGORY_APPS["newsletter"] == "newsletter"
    assert catalogue.MESSAGE_APPS["newsletter.issue"] == "newsletter"
    # After every app installed before it: the preference centre's order.
    assert list(catalogue.CATEGORIES)[-1] == "newsletter"
    assert preferences.choosable_categories().keys() >= {"security", "account", "newsletter"}
    rendered = catalogue.render(
        key="newsletter.issue",
        params={"title": "December", "url": "https://example.com/december"},
        language="en",
    )
    assert rendered.subject == "December: the new issue"
    assert rendered.body.endswith("Read it here:\n\nhttps://example.com/december")
    assert check_catalogue() == []


def test_it_is_sent_with_send_notification_and_its_category_read_for_the_recipient(
    newsletter, django_user_model
):
    reader = django_user_model.objects.create_user("reader", email="reader@example.com")
    enqueued = send_notification(
        user=reader,
        type="newsletter.issue",
        params={"title": "December", "url": "https://example.com/december"},
        channels=["email", "webhook"],
    )
    rows = dict(
        NotificationDelivery.objects.filter(notification=enqueued.notification).values_list(
            "channel", "status"
        )
    )
    # Email is on by default; the webhook is off by default (and has no address here).
    assert rows == {"email": Status.PENDING, "webhook": Status.SKIPPED}
    with pytest.raises(ValueError, match="needs the parameter"):
        send_notification(user=reader, type="newsletter.issue", params={"title": "x"})


def test_its_category_is_on_the_preference_centre(newsletter, client, django_user_model):
    reader = django_user_model.objects.create_user("reader", email="reader@example.com")
    client.force_login(reader)
    page = client.get("/account/notifications/").content.decode()
    assert "newsletter" in preferences.choosable_categories()
    assert "Newsletter" in page and 'name="on-newsletter-email"' in page
    # Off on webhooks by default, as its registration says.
    assert not catalogue.CATEGORIES["newsletter"].default_for("webhook")


def test_a_bad_registration_of_the_app_is_a_check_error_naming_it(newsletter):
    catalogue.register_message(
        "newsletter.typo",
        Message(
            subject=catalogue.MESSAGES["newsletter.issue"].subject,
            body=catalogue.MESSAGES["newsletter.issue"].body,
            category="newsleter",
            params=frozenset({"title", "url"}),
        ),
        app="newsletter",
    )
    try:
        [error] = check_catalogue()
    finally:
        catalogue.unregister_message("newsletter.typo")
    assert error.id == "recipients.E001"
    assert "'newsletter.typo' (registered by newsletter)" in error.msg
    assert "'newsleter'" in error.msg and "newsletter" in error.hint
