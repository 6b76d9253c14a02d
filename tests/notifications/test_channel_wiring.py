"""Telegram, Discord and webhooks as the site runs them: built from the settings, chosen by a
user's addresses, switched off by the provider's "never again", and delivered by a real
drain_outbox process to loopback peers, each message exactly once."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.core import checks

import transports as channels
from notifications import enqueue, worker
from notifications.models import Notification, NotificationDelivery
from recipients.models import ChannelAddress, WebhookSecret
from tests.helpers import counts, drain_until, notify
from tests.httppeers import Behaviour, DiscordPeer, TelegramPeer, WebhookReceiver
from transports import deadlines, signing
from transports.base import ChannelError, Outgoing
from transports.discord import DiscordChannel
from transports.email import EmailChannel
from transports.telegram import TelegramChannel
from transports.webhook import WebhookChannel

TOKEN = "123456:test-token"


@pytest.fixture
def peers():
    secret = signing.new_secret()
    made = {
        "telegram": TelegramPeer(token=TOKEN),
        "discord": DiscordPeer(token=TOKEN),
        "webhook": WebhookReceiver(secrets=[secret]),
    }
    made["secret"] = secret
    yield made
    for name in ("telegram", "discord", "webhook"):
        made[name].stop()


@pytest.fixture
def wired(settings, peers):
    settings.TELEGRAM_BOT_TOKEN = settings.DISCORD_BOT_TOKEN = TOKEN
    settings.TELEGRAM_API_BASE_URL = peers["telegram"].base_url
    settings.DISCORD_API_BASE_URL = peers["discord"].base_url
    settings.DELIVERY_WEBHOOK_ALLOW_LOOPBACK = True
    channels._load.cache_clear()
    yield peers
    for channel in channels.configured().values():
        channel.close()
    channels._load.cache_clear()


def addresses(user, peers) -> None:
    ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    ChannelAddress.objects.create(user=user, channel="discord", address="2002")
    hook = ChannelAddress.objects.create(
        user=user, channel="webhook", address=peers["webhook"].url + "/hooks/v10r"
    )
    WebhookSecret.objects.create(address=hook, secret=peers["secret"])


def test_the_channels_are_built_from_the_settings(wired):
    assert isinstance(channels.get("telegram"), TelegramChannel)
    assert channels.get("telegram").base_url == wired["telegram"].base_url
    assert isinstance(channels.get("discord"), DiscordChannel)
    assert isinstance(channels.get("webhook"), WebhookChannel)
    assert channels.get("telegram").worst_case.total_seconds() == 11


def test_a_bot_channel_without_its_token_warns_and_fails_its_rows(db, settings, user):
    settings.TELEGRAM_BOT_TOKEN = ""
    settings.DISCORD_BOT_TOKEN = TOKEN
    channels._load.cache_clear()
    try:
        warnings = [m for m in checks.run_checks() if m.id == "transports.W001"]
        assert [w.msg.split(":")[0] for w in warnings] == [
            "The telegram channel is configured but TELEGRAM_BOT_TOKEN is not set"
        ]
        # The setting an operator controls, not the one derived from it.
        assert "V10R_CHANNELS" in warnings[0].hint
        ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
        notify(user, channels=["telegram"])
        worker.drain_once()
        (row,) = NotificationDelivery.objects.all()
        assert (row.status, row.error_code) == ("failed", "TELEGRAM_NO_TOKEN")
    finally:
        channels._load.cache_clear()


def test_with_no_channels_named_the_users_addresses_choose(db, user, peers):
    addresses(user, peers)
    ChannelAddress.objects.filter(channel="discord").update(is_active=False)
    enqueued = enqueue.send_notification(user=user, type="test.note", params={"label": "x"})
    # The inbox last: every account has one.
    assert enqueued.queued == ("email", "telegram", "webhook", "inapp")
    # The turned-off address is recorded, not left out: staff can see why it did not go.
    assert enqueued.skipped == {"discord": "channel_off"}
    rows = enqueued.notification.deliveries.order_by("channel")
    assert [(d.channel, d.status, d.skip_reason) for d in rows] == [
        ("discord", "skipped", "channel_off"),
        ("email", "pending", ""),
        ("inapp", "pending", ""),
        ("telegram", "pending", ""),
        ("webhook", "pending", ""),
    ]


def test_a_user_with_nowhere_to_send_gets_one_skipped_email_row(db, django_user_model, settings):
    # A site that runs no inbox: every account would have one there.
    settings.DELIVERY_CHANNELS = {
        name: path for name, path in settings.DELIVERY_CHANNELS.items() if name != "inapp"
    }
    nobody = django_user_model.objects.create_user("nobody")  # no email either
    enqueued = enqueue.send_notification(user=nobody, type="test.note", params={"label": "x"})
    assert (enqueued.queued, enqueued.skipped) == ((), {"email": "no_address"})
    assert [(d.channel, d.status) for d in enqueued.notification.deliveries.all()] == [
        ("email", "skipped")
    ]


@pytest.mark.parametrize(
    ("channel", "behaviour", "code"),
    [("telegram", Behaviour.BLOCKED, "BOT_BLOCKED"), ("webhook", Behaviour.GONE, "ENDPOINT_GONE")],
    ids=["blocked-bot", "gone-webhook-endpoint"],
)
def test_a_providers_never_again_switches_the_address_off_and_says_why(
    db, user, wired, channel, behaviour, code
):
    addresses(user, wired)
    wired[channel].behaviour = behaviour
    notify(user, channels=[channel])
    worker.drain_once()
    address = ChannelAddress.objects.get(channel=channel)
    assert not address.is_active
    assert address.deactivated_at is not None
    assert address.deactivated_reason.startswith(f"{code}: ")
    assert NotificationDelivery.objects.get().status == "failed"


def test_the_webhook_carries_the_notification_and_both_secrets_during_rotation(db, user, wired):
    addresses(user, wired)
    new = signing.new_secret()
    WebhookSecret.objects.update(secret=new, previous_secret=wired["secret"])
    wired["webhook"].secrets = [new]  # the receiver has switched over already
    enqueue.send_notification(
        user=user,
        type="test.note",
        params={"label": "x"},
        channels=["webhook"],
    )
    worker.drain_once()
    (request,) = wired["webhook"].requests
    assert request.verified
    assert len(request.headers["webhook-signature"].split()) == 2
    body = request.json()
    assert (body["type"], body["key"], body["params"]) == (
        "test.note",
        "test.note",
        {"label": "x"},
    )
    delivery = NotificationDelivery.objects.get()
    assert request.headers["webhook-id"] == str(delivery.pk)


def test_one_watchdog_thread_cuts_the_slow_conversations_of_every_channel(settings, smtp_server):
    """An SMTP server that takes 0.6 s over each reply and a Bot API that trickles, talked to
    at once: each send ends at its own one-second deadline, and one thread cut them both."""
    settings.MAILERS = {"default": smtp_server.mailer(timeout=1.0)}
    smtp_server.mailbox.step_delay = 0.6  # each reply within the socket timeout, not all three
    bot_api = TelegramPeer(token=TOKEN)
    bot_api.behaviour = Behaviour.TRICKLE
    email = EmailChannel()
    telegram = TelegramChannel(
        base_url=bot_api.base_url, token=TOKEN, total_timeout=timedelta(seconds=1)
    )
    message = {"delivery_id": 1, "subject": "S", "body": "B", "action_url": "", "language": "en"}
    sends = {"email": (email, "ada@example.com"), "telegram": (telegram, "42")}
    ended = {}

    def timed(name):
        channel, address = sends[name]
        started = time.monotonic()
        try:
            channel.send(Outgoing(channel=name, address=address, **message))
        except ChannelError as exc:
            ended[name] = (exc.code, time.monotonic() - started)

    threads = [threading.Thread(target=timed, args=(name,)) for name in sends]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        email.close()
        telegram.close()
        bot_api.stop()
    assert sorted(ended) == ["email", "telegram"]
    assert ended["email"][0] == "TIMEOUT" and ended["email"][1] < 1.5
    assert ended["telegram"][0] == "HTTP_TIMEOUT" and ended["telegram"][1] < 1.5
    watchdogs = [t.name for t in threading.enumerate() if "deadlines" in t.name]
    assert watchdogs == [deadlines.THREAD_NAME]


def test_a_drain_process_delivers_a_mixed_batch_once_each(
    transactional_db, django_user_model, peers, smtp_server
):
    users = [
        django_user_model.objects.create_user(f"reader-{n}", email=f"reader-{n}@example.com")
        for n in range(10)
    ]
    for user in users:
        addresses(user, peers)
        notify(user, label=user.username)
    # Four channels with an address each, and the inbox.
    assert NotificationDelivery.objects.count() == 50
    done, code, output = drain_until(
        lambda: counts() == {"sent": 50},
        "--batch-size",
        "25",
        smtp_port=smtp_server.port,
        seconds=90,
        every=0.3,
        extra_env={
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "DISCORD_BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE_URL": peers["telegram"].base_url,
            "DISCORD_API_BASE_URL": peers["discord"].base_url,
            "DELIVERY_WEBHOOK_ALLOW_LOOPBACK": "1",
        },
    )
    assert done, (counts(), output[-3000:])
    assert code == 0
    assert len(smtp_server.mailbox.message_ids()) == 10
    assert set(smtp_server.mailbox.message_ids().values()) == {1}
    assert len(peers["telegram"].messages) == 10
    assert len(peers["discord"].messages) == 10
    hooks = peers["webhook"].requests
    assert len(hooks) == 10 and all(r.verified for r in hooks)
    assert not Notification.objects.filter(inbox_at__isnull=True).exists()
    assert len({r.headers["webhook-id"] for r in hooks}) == 10
