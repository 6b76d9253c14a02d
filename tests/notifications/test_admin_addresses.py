"""Staff and channel addresses: a blocked bot shows as deactivated with why, webhook secrets
are masked and rotate with the old one still valid, and an address is checked for its channel."""

from __future__ import annotations

import pytest

from notifications import enqueue, worker
from notifications.models import ChannelAddress, WebhookSecret
from tests.httppeers import Behaviour, TelegramPeer

pytestmark = pytest.mark.django_db

LIST = "/admin/notifications/channeladdress/"


@pytest.fixture
def staff(client, django_user_model):
    admin = django_user_model.objects.create_superuser("staff", "staff@example.com", "pw-12345")
    client.force_login(admin)
    return client


def test_a_blocked_bots_address_shows_as_deactivated_with_why(staff, user, settings):
    from notifications import channels

    peer = TelegramPeer(token="1:t")
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = "1:t", peer.base_url
    channels._load.cache_clear()
    try:
        ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
        peer.behaviour = Behaviour.BLOCKED
        enqueue.send_notification(
            user=user,
            type="t",
            message_key="queue.demo",
            params={"label": "x"},
            channels=["telegram"],
        )
        worker.drain_once()
    finally:
        channels.get("telegram").close()
        channels._load.cache_clear()
        peer.stop()
    page = staff.get(LIST + "?is_active__exact=0").content.decode()
    assert "1001" in page
    assert "deactivated" in page
    assert "BOT_BLOCKED" in page
    ru = staff.get("/ru" + LIST).content.decode()
    assert "Выберите адрес в канале для изменения" in ru and "отключён" in ru


def test_webhook_secrets_are_masked_and_rotate_with_the_old_one_valid(staff, user):
    hook = ChannelAddress.objects.create(
        user=user, channel="webhook", address="https://hooks.example/v10r"
    )
    response = staff.post(LIST, {"action": "rotate_webhook_secret", "_selected_action": [hook.pk]})
    assert response.status_code == 302
    first = WebhookSecret.objects.get(address=hook).secret
    # Shown once, on the page after the action, for staff to hand to the receiver.
    assert first in staff.get(LIST).content.decode()
    staff.post(LIST, {"action": "rotate_webhook_secret", "_selected_action": [hook.pk]})
    row = WebhookSecret.objects.get(address=hook)
    assert row.secret in staff.get(LIST).content.decode()
    assert row.previous_secret == first and row.secret != first and row.rotated_at
    page = staff.get(f"{LIST}{hook.pk}/change/").content.decode()
    assert row.secret not in page and first not in page
    assert f"…{row.secret[-4:]}" in page and f"…{first[-4:]}" in page
    staff.post(LIST, {"action": "drop_previous_webhook_secret", "_selected_action": [hook.pk]})
    assert WebhookSecret.objects.get(address=hook).secrets() == [row.secret]


@pytest.mark.parametrize(
    ("channel", "address", "error"),
    [
        ("telegram", "not a chat", "A Telegram chat id is a number"),
        ("discord", "12ab", "A Discord user id is a number"),
        ("webhook", "ftp://hooks.example/", "Only http and https URLs"),
        ("webhook", "https://user:pw@hooks.example/", "user name or password"),
    ],
)
def test_an_address_is_checked_for_its_channel(staff, user, channel, address, error):
    response = staff.post(
        LIST + "add/", {"user": user.pk, "channel": channel, "address": address, "is_active": "on"}
    )
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not ChannelAddress.objects.exists()


def test_switching_an_address_back_on_clears_why_it_was_off(staff, user):
    address = ChannelAddress.objects.create(
        user=user,
        channel="telegram",
        address="1001",
        is_active=False,
        deactivated_reason="BOT_BLOCKED: blocked",
    )
    ChannelAddress.objects.filter(pk=address.pk).update(deactivated_at="2026-11-30T00:00Z")
    response = staff.post(
        f"{LIST}{address.pk}/change/",
        {
            "user": user.pk,
            "channel": "telegram",
            "address": "1001",
            "is_active": "on",
            "webhook_secret-TOTAL_FORMS": "0",
            "webhook_secret-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    address.refresh_from_db()
    assert address.is_active and address.deactivated_at is None and not address.deactivated_reason


def test_the_dashboard_probes_a_bot_and_shows_the_round_trip(staff, settings):
    from notifications import channels

    peer = TelegramPeer(token="1:t")
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = "1:t", peer.base_url
    channels._load.cache_clear()
    try:
        page = staff.get("/admin/").content.decode()
        assert 'data-probe="telegram"' in page and 'data-probe="discord"' in page
        assert 'data-probe="email"' not in page
        response = staff.post("/admin/notifications/channeladdress/probe/telegram/", follow=True)
        text = response.content.decode()
        assert "Telegram: @v10r_bot answered in" in text  # message_user capitalises it
        peer.behaviour = Behaviour.UNAVAILABLE
        failed = staff.post("/admin/notifications/channeladdress/probe/telegram/", follow=True)
        assert "Telegram: the probe failed: HTTP_503" in failed.content.decode()
        assert staff.get("/admin/notifications/channeladdress/probe/telegram/").status_code == 404
        assert staff.post("/admin/notifications/channeladdress/probe/email/").status_code == 404
    finally:
        channels.get("telegram").close()
        channels._load.cache_clear()
        peer.stop()
