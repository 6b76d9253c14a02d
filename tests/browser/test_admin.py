"""The staff console in Chromium: Retry from Needs Attention, and a running drain sends it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from notifications.models import NotificationDelivery, Status
from tests.browser.conftest import csp_violations, log_in
from tests.helpers import database_url, finish, make_deliveries, poll, start_drain, stop

pytestmark = pytest.mark.browser


@pytest.fixture
def dead_delivery(django_user_model) -> int:
    """A dead email delivery's id, and "fixer" (password a-long-password-1): staff who may
    see it in Needs Attention and retry it."""
    recipient = django_user_model.objects.create_user("reader", email="reader@example.com")
    [delivery_id] = make_deliveries(recipient, 1, channel="email")
    finish([delivery_id], status="dead")
    member = django_user_model.objects.create_user(
        "fixer", password="a-long-password-1", is_staff=True
    )
    for codename in ("view_needsattention", "view_notificationdelivery", "retry_delivery"):
        member.user_permissions.add(Permission.objects.get(codename=codename))
    return delivery_id


def test_staff_retry_a_dead_delivery_and_the_running_drain_sends_it(
    site, page, dead_delivery, smtp_server
):
    delivery_id = dead_delivery

    drain = start_drain(url=database_url(), smtp_port=smtp_server.port)
    try:
        log_in(page, site, username="fixer", password="a-long-password-1")
        assert "Needs attention (1)" in page.text_content("#content")
        assert csp_violations(page) == []

        page.click("text=Needs attention (1)")
        page.wait_for_selector(".retry-button")
        assert csp_violations(page) == []
        page.click(".retry-button")
        message = page.wait_for_selector(".messagelist .success")
        assert "1 delivery requeued." in message.text_content()
        assert csp_violations(page) == []

        sent = poll(
            lambda: NotificationDelivery.objects.get(pk=delivery_id).status == Status.SENT,
            seconds=30,
        )
    finally:
        code, output = stop(drain)
    assert sent, output
    assert code == 0


@pytest.mark.parametrize(
    "path",
    [
        "/admin/",
        "/ru/admin/",
        "/de/admin/notifications/notificationdelivery/?status=retrying",
        "/admin/notifications/needsattention/",
        "/admin/notifications/faileddelivery/",
    ],
)
def test_the_staff_console_loads_without_a_csp_violation(site, page, django_user_model, path):
    django_user_model.objects.create_superuser("boss", "boss@example.com", "a-long-password-1")
    log_in(page, site, username="boss", password="a-long-password-1")
    response = page.goto(site.url + path)
    assert response.status == 200
    page.wait_for_load_state("networkidle")
    assert csp_violations(page) == []


RETRIED = {
    "": ("Delivery", "View delivery", "Retried (requeued with a fresh budget)."),
    "/ru": (
        "Доставка",
        "Просмотр доставки",
        "Повторено (возвращено в очередь с новым запасом попыток).",
    ),
}


@pytest.mark.parametrize("language", ["", "/ru"], ids=["en", "ru"])
@pytest.mark.parametrize("how", ["button", "action"])
def test_recent_actions_lead_from_a_retry_to_the_deliverys_own_page(
    site, page, dead_delivery, language, how
):
    delivery_id = dead_delivery
    kind, title, note = RETRIED[language]

    log_in(page, site, username="fixer", password="a-long-password-1")
    page.goto(f"{site.url}{language}/admin/notifications/needsattention/")
    if how == "button":
        page.click(".retry-button")
    else:
        page.check(f'input[name="_selected_action"][value="{delivery_id}"]')
        page.select_option('select[name="action"]', "retry_selected")
        page.click('.actions button[name="index"]')
    page.wait_for_selector(".messagelist .success")

    page.goto(f"{site.url}{language}/admin/")
    entry = page.locator("#recent-actions-module .actionlist li").first
    assert entry.locator("a").text_content().strip() == f"#{delivery_id} · email"
    assert entry.locator(".mini").text_content().strip() == kind
    entry.locator("a").click()
    page.wait_for_load_state()
    # The delivery's own page, not the Needs attention list's, which no longer has the row.
    assert page.url == (
        f"{site.url}{language}/admin/notifications/notificationdelivery/{delivery_id}/change/"
    )
    assert page.locator(".messagelist li").count() == 0
    assert page.text_content("#content h1") == title
    page.click(".historylink")
    assert page.text_content("[data-change-message]") == note
    assert csp_violations(page) == []
