"""Staff and channel addresses: a blocked bot shows as deactivated with why, webhook secrets
are masked and rotate with the old one still valid, and an address is checked for its channel."""

from __future__ import annotations

import html
import re

import pytest

import transports as channels
from notifications import worker
from recipients.models import ChannelAddress, WebhookSecret
from tests.address_refusals import REFUSED_ADDRESSES
from tests.helpers import notify
from tests.httppeers import Behaviour, TelegramPeer, WebhookReceiver

pytestmark = pytest.mark.django_db

LIST = "/admin/recipients/channeladdress/"


@pytest.fixture
def staff(client, django_user_model):
    admin = django_user_model.objects.create_superuser("staff", "staff@example.com", "pw-12345")
    client.force_login(admin)
    return client


def test_a_blocked_bots_address_shows_as_deactivated_with_why(staff, user, settings):
    import transports as channels

    peer = TelegramPeer(token="1:t")
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = "1:t", peer.base_url
    channels._load.cache_clear()
    try:
        ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
        peer.behaviour = Behaviour.BLOCKED
        notify(user, channels=["telegram"])
        worker.drain_once()
    finally:
        channels.get("telegram").close()
        channels._load.cache_clear()
        peer.stop()
    page = staff.get(LIST + "?is_active__exact=0").content.decode()
    assert "1001" in page
    # Switched off in a field of its own, why in words; the provider's own on its page.
    assert cell(page, "state") == "switched off"
    assert cell(page, "why").startswith("The recipient blocked the bot")
    address = ChannelAddress.objects.get()
    assert address.deactivated_reason.startswith("BOT_BLOCKED: ")
    change = html.unescape(staff.get(f"{LIST}{address.pk}/change/").content.decode())
    assert f"<code>{address.deactivated_reason}</code>" in change
    assert 'data-state="switched-off"' in change
    ru = staff.get("/ru" + LIST).content.decode()
    assert "Выберите адрес в канале для изменения" in ru
    assert cell(ru, "state") == "отключён"
    assert cell(ru, "why").startswith("Получатель заблокировал бота")
    de = staff.get("/de" + LIST).content.decode()
    assert cell(de, "state") == "abgeschaltet"
    assert cell(de, "why").startswith("Der Empfänger hat den Bot blockiert")


def cell(page: str, field: str) -> str:
    """The one list row's cell of field, as text."""
    [found] = re.findall(rf'<td class="field-{field}">(.*?)</td>', page, re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found)).split())


@pytest.mark.parametrize(
    ("stored", "sentence"),
    [
        ("BOT_BLOCKED: Forbidden: bot was blocked by the user", "The recipient blocked the bot"),
        ("ENDPOINT_GONE: HTTP 410", "The webhook's endpoint answered 410 Gone"),
        ("WEBPUSH_GONE: The push service answered 410", "The browser's push subscription has"),
        ("WEBPUSH_BAD_KEYS: not a P-256 key", "The browser's push subscription has keys"),
        ("SOMETHING_NEW: a provider's words", "The provider refused this address for good"),
        ("", "Switched off by hand; no reason was recorded."),
    ],
)
def test_each_stored_reason_reads_as_a_sentence_with_the_detail_kept(staff, user, stored, sentence):
    address = ChannelAddress.objects.create(
        user=user, channel="telegram", address="1001", is_active=False, deactivated_reason=stored
    )
    page = staff.get(LIST).content.decode()
    assert cell(page, "state") == "switched off"
    assert cell(page, "why").startswith(sentence)
    change = html.unescape(staff.get(f"{LIST}{address.pk}/change/").content.decode())
    if stored:
        assert f"<code>{stored}</code>" in change


def test_every_code_a_channel_switches_an_address_off_with_has_a_sentence():
    """Walk the channels for ChannelError(…, deactivate_address=True) and each code it names."""
    import ast
    from pathlib import Path

    import transports as channels
    from recipients import deactivation

    found = set()
    for path in Path(channels.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            flags = {k.arg: k.value for k in node.keywords}
            flag = flags.get("deactivate_address")
            if isinstance(flag, ast.Constant) and flag.value is True:
                code = node.args[0]
                assert isinstance(code, ast.Constant), ast.unparse(node)
                found.add(code.value)
    assert found == set(deactivation.SENTENCES)


def test_an_active_address_shows_as_active_with_no_reason(staff, user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    page = staff.get(LIST).content.decode()
    assert cell(page, "state") == "active"
    assert cell(page, "why") == "-"


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


@pytest.mark.parametrize(("prefix", "channel", "address", "error"), REFUSED_ADDRESSES)
def test_an_address_is_checked_for_its_channel_in_the_staff_members_language(
    staff, user, prefix, channel, address, error
):
    response = staff.post(prefix + LIST + "add/", form(user, channel, address))
    assert response.status_code == 200
    assert error in html.unescape(response.content.decode())
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
    import transports as channels

    peer = TelegramPeer(token="1:t")
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = "1:t", peer.base_url
    channels._load.cache_clear()
    try:
        page = staff.get("/admin/").content.decode()
        assert 'data-probe="telegram"' in page and 'data-probe="discord"' in page
        assert 'data-probe="email"' not in page
        response = staff.post("/admin/recipients/channeladdress/probe/telegram/", follow=True)
        text = response.content.decode()
        assert "Telegram: @v10r_bot answered in" in text  # message_user capitalises it
        peer.behaviour = Behaviour.UNAVAILABLE
        failed = staff.post("/admin/recipients/channeladdress/probe/telegram/", follow=True)
        assert "Telegram: the probe failed: HTTP_503" in failed.content.decode()
        assert staff.get("/admin/recipients/channeladdress/probe/telegram/").status_code == 404
        assert staff.post("/admin/recipients/channeladdress/probe/email/").status_code == 404
    finally:
        channels.get("telegram").close()
        channels._load.cache_clear()
        peer.stop()


def test_only_staff_with_the_probe_permission_make_the_site_call_a_provider(
    client, django_user_model, settings
):
    from django.contrib.auth.models import Permission

    import transports as channels

    peer = TelegramPeer(token="1:t")
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = "1:t", peer.base_url
    channels._load.cache_clear()
    looker = django_user_model.objects.create_user("looker", is_staff=True)
    looker.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client.force_login(looker)
    probe = "/admin/recipients/channeladdress/probe/telegram/"
    try:
        assert "data-probe=" not in client.get("/admin/").content.decode()
        assert client.post(probe).status_code == 403
        assert peer.requests == []  # refused before the site called anyone
        looker.user_permissions.add(Permission.objects.get(codename="probe_channel"))
        assert 'data-probe="telegram"' in client.get("/admin/").content.decode()
        answered = client.post(probe, follow=True).content.decode()
        assert "Telegram: @v10r_bot answered in" in answered
        assert [request.path for request in peer.requests] == ["/bot1:t/getMe"]
    finally:
        channels.get("telegram").close()
        channels._load.cache_clear()
        peer.stop()


def form(user, channel: str, address: str, *, active: bool = True) -> dict:
    data = {
        "user": user.pk,
        "channel": channel,
        "address": address,
        "webhook_secret-TOTAL_FORMS": "0",
        "webhook_secret-INITIAL_FORMS": "0",
    }
    return data | ({"is_active": "on"} if active else {})


@pytest.fixture
def loopback_webhooks(settings):
    """Webhooks may reach a receiver on 127.0.0.1, as in local development."""
    import transports as channels

    settings.DELIVERY_WEBHOOK_ALLOW_LOOPBACK = True
    channels._load.cache_clear()
    yield
    for channel in channels.configured().values():
        channel.close()
    channels._load.cache_clear()


def test_a_webhook_added_in_the_admin_gets_a_secret_shown_once_and_delivers(
    staff, user, loopback_webhooks
):
    receiver = WebhookReceiver(secrets=[])
    try:
        response = staff.post(
            LIST + "add/", form(user, "webhook", receiver.url + "/hook"), follow=True
        )
        hook = ChannelAddress.objects.get(channel="webhook")
        secret = WebhookSecret.objects.get(address=hook).secret
        assert secret.startswith("whsec_")
        # Shown once, with the page that follows the save, for the receiver's owner.
        assert f"<code>{secret}</code>" in response.content.decode()
        assert secret not in staff.get(f"{LIST}{hook.pk}/change/").content.decode()
        receiver.secrets = [secret]
        notify(user, channels=["webhook"])
        worker.drain_once()
        delivery = hook.user.notifications.get().deliveries.get()
        assert (delivery.status, delivery.error_code) == ("sent", "")
        assert [request.verified for request in receiver.requests] == [True]
    finally:
        receiver.stop()


def test_an_address_changed_to_a_webhook_gets_a_secret(staff, user, loopback_webhooks):
    address = ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    response = staff.post(
        f"{LIST}{address.pk}/change/", form(user, "webhook", "http://127.0.0.1:9/hook"), follow=True
    )
    secret = WebhookSecret.objects.get(address=address).secret
    assert f"<code>{secret}</code>" in response.content.decode()
    # Saving it again keeps the secret the receiver was given.
    staff.post(f"{LIST}{address.pk}/change/", form(user, "webhook", "http://127.0.0.1:9/hook"))
    assert WebhookSecret.objects.get(address=address).secrets() == [secret]


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://10.0.0.5/", "10.0.0.5 may not be reached: a private network."),
        ("http://192.168.1.10/", "192.168.1.10 may not be reached: a private network."),
        ("http://169.254.169.254/", "169.254.169.254 may not be reached: link-local"),
        ("http://[::ffff:10.0.0.5]/", "may not be reached: IPv4-mapped, carrying 10.0.0.5"),
        ("http://localhost/", "may not be reached: loopback."),
        ("http://0x7f.1/", "0x7f.1 (127.0.0.1) may not be reached: loopback."),
    ],
)
def test_a_webhook_the_drain_would_refuse_is_refused_by_the_form(staff, user, url, error):
    # The channel as the site's settings build it: not one an earlier test let reach loopback.
    channels._load.cache_clear()
    response = staff.post(LIST + "add/", form(user, "webhook", url))
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not ChannelAddress.objects.exists()


@pytest.mark.parametrize(
    ("address", "error", "absent"),
    [
        # Empty: the field's own error, and nothing about URLs beside it.
        ("", "This field is required.", "http and https"),
        ("example.com/hook", "This is not a full URL: write it with https:// in front.", "none"),
        ("ftp://example.com/", "Only http and https URLs are allowed, not 'ftp'.", "none"),
        # Over the field's 500 characters: its length error alone.
        ("https://example.com/" + "a" * 500, "Ensure this value has at most 500", "http and https"),
    ],
)
def test_a_webhook_address_that_is_no_url_gets_one_error_that_says_why(
    staff, user, address, error, absent
):
    page = html.unescape(staff.post(LIST + "add/", form(user, "webhook", address)).content.decode())
    errors = page.split('class="errorlist', 1)[-1].split("</ul>")[0]
    assert error in errors
    assert absent not in errors
    assert not ChannelAddress.objects.exists()


def test_loopback_webhooks_are_accepted_where_the_drain_may_reach_them(
    staff, user, loopback_webhooks
):
    response = staff.post(LIST + "add/", form(user, "webhook", "http://localhost:9/hook"))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert ChannelAddress.objects.get().address == "http://localhost:9/hook"


@pytest.mark.parametrize(
    ("prefix", "error"),
    [
        ("", "reader already has an active Telegram address. Switch that one off first"),
        ("/ru", "У reader уже есть активный адрес в канале Telegram."),
        ("/de", "reader hat schon eine aktive Adresse für Telegram."),
    ],
)
def test_a_second_active_address_on_a_channel_is_refused_in_words(staff, user, prefix, error):
    ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    response = staff.post(prefix + LIST + "add/", form(user, "telegram", "1002"))
    body = response.content.decode()
    assert response.status_code == 200
    assert error in body
    assert "channel_addresses_one_active" not in body
    assert ChannelAddress.objects.count() == 1
    # Switched off, the second one may be kept beside the first.
    staff.post(prefix + LIST + "add/", form(user, "telegram", "1002", active=False))
    assert ChannelAddress.objects.count() == 2


PUSH_ENDPOINT = "https://push.example.com/send/"


def test_staff_cannot_type_in_a_push_subscription(staff, user):
    response = staff.post(LIST + "add/", form(user, "webpush", PUSH_ENDPOINT + "typed"))
    assert response.status_code == 200
    assert "A push subscription is made by the browser that receives it" in html.unescape(
        response.content.decode()
    )
    assert not ChannelAddress.objects.exists()


def test_staff_switch_one_of_a_users_browsers_off_and_on_beside_the_others(staff, user):
    phone, laptop = (
        ChannelAddress.objects.create(user=user, channel="webpush", address=PUSH_ENDPOINT + name)
        for name in ("phone", "laptop")
    )
    off = form(user, "webpush", phone.address, active=False)
    assert staff.post(f"{LIST}{phone.pk}/change/", off).status_code == 302
    phone.refresh_from_db()
    assert not phone.is_active
    # On again while the laptop's is active: several browsers are one user's right.
    on = form(user, "webpush", phone.address)
    assert staff.post(f"{LIST}{phone.pk}/change/", on).status_code == 302
    assert ChannelAddress.objects.filter(pk__in=[phone.pk, laptop.pk], is_active=True).count() == 2
    moved = form(user, "webpush", PUSH_ENDPOINT + "elsewhere")
    refused = staff.post(f"{LIST}{phone.pk}/change/", moved)
    assert refused.status_code == 200
    phone.refresh_from_db()
    assert phone.address == PUSH_ENDPOINT + "phone"
