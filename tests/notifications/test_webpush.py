"""Web push, the server half: VAPID keys from `manage.py vapid_keys` into the settings, and
pushes sent by a real drain_outbox to a push service on loopback that decrypts them."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

import transports as channels
from core import vapid
from notifications import enqueue
from notifications.models import NotificationDelivery
from recipients import catalogue, subscriptions
from recipients.models import ChannelAddress, PushSubscription, Recipient
from tests.helpers import channels_env, make_outgoing, notify, python
from tests.pushpeer import PushPeer, decrypt
from tests.v10r.test_settings import read_settings
from transports import webpush

SUBJECT = "mailto:ops@example.com"


def printed_keys(*args: str) -> dict[str, str]:
    out = io.StringIO()
    call_command("vapid_keys", *args, stdout=out)
    return dict(line.split("=", 1) for line in out.getvalue().splitlines())


def test_vapid_keys_prints_env_lines_the_settings_read_back(monkeypatch):
    env = printed_keys("--subject", SUBJECT)
    assert sorted(env) == [
        "WEBPUSH_VAPID_PRIVATE_KEY",
        "WEBPUSH_VAPID_PUBLIC_KEY",
        "WEBPUSH_VAPID_SUBJECT",
    ]
    read = read_settings(monkeypatch, **env)
    assert read["WEBPUSH_VAPID_PUBLIC_KEY"] == env["WEBPUSH_VAPID_PUBLIC_KEY"]
    # The private key signs what the public key names: the two are one pair.
    key = vapid.private_key(read["WEBPUSH_VAPID_PRIVATE_KEY"])
    assert vapid.public_text(key) == env["WEBPUSH_VAPID_PUBLIC_KEY"]


def test_each_run_prints_a_fresh_pair_and_only_the_pair_without_a_subject():
    first, second = printed_keys(), printed_keys()
    assert sorted(first) == ["WEBPUSH_VAPID_PRIVATE_KEY", "WEBPUSH_VAPID_PUBLIC_KEY"]
    assert first != second


def test_vapid_keys_run_as_an_operator_does_prints_only_the_key_lines_on_stdout(
    tmp_path, monkeypatch
):
    """`manage.py vapid_keys … >> v10r.env` appends the lines and nothing else: the advice,
    and any warning, go to stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WEBPUSH_"))}
    env |= {
        "DJANGO_SECRET_KEY": "vapid-keys-" + "k" * 50,
        "V10R_CHANNELS": channels_env("email", "webpush"),
    }
    result = python("manage.py", "vapid_keys", "--subject", SUBJECT, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n")  # the next line appended starts on a line of its own
    names = [line.partition("=")[0] for line in result.stdout.splitlines()]
    assert names == [
        "WEBPUSH_VAPID_PUBLIC_KEY",
        "WEBPUSH_VAPID_PRIVATE_KEY",
        "WEBPUSH_VAPID_SUBJECT",
    ]
    assert "restart" in result.stderr
    # No system check ran: web push not being set up yet is why the command is run.
    assert "W010" not in result.stderr
    env_file = tmp_path / "v10r.env"
    env_file.write_text("DJANGO_ALLOWED_HOSTS=v10r.example\n" + result.stdout)
    appended = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    read = read_settings(monkeypatch, **appended)
    assert read["WEBPUSH_VAPID_SUBJECT"] == SUBJECT


def test_vapid_keys_refuses_a_subject_a_push_service_cannot_use():
    with pytest.raises(CommandError, match="WEBPUSH_VAPID_SUBJECT"):
        printed_keys("--subject", "ops@example.com")


PAIR = vapid.new_pair()
OTHER = vapid.new_pair()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WEBPUSH_VAPID_PUBLIC_KEY": PAIR[0]}, "WEBPUSH_VAPID_PRIVATE_KEY is not set"),
        ({"WEBPUSH_VAPID_PRIVATE_KEY": PAIR[1]}, "WEBPUSH_VAPID_PUBLIC_KEY is not set"),
        (
            {"WEBPUSH_VAPID_PUBLIC_KEY": "not+base64", "WEBPUSH_VAPID_PRIVATE_KEY": PAIR[1]},
            "WEBPUSH_VAPID_PUBLIC_KEY is not a P-256 public key",
        ),
        (
            {"WEBPUSH_VAPID_PUBLIC_KEY": PAIR[0], "WEBPUSH_VAPID_PRIVATE_KEY": PAIR[0]},
            "WEBPUSH_VAPID_PRIVATE_KEY is not a P-256 private key",
        ),
        (
            {"WEBPUSH_VAPID_PUBLIC_KEY": OTHER[0], "WEBPUSH_VAPID_PRIVATE_KEY": PAIR[1]},
            "is not the public half",
        ),
        (
            {"WEBPUSH_VAPID_PUBLIC_KEY": PAIR[0], "WEBPUSH_VAPID_PRIVATE_KEY": PAIR[1]},
            "WEBPUSH_VAPID_SUBJECT is ''",
        ),
        (
            {
                "WEBPUSH_VAPID_PUBLIC_KEY": PAIR[0],
                "WEBPUSH_VAPID_PRIVATE_KEY": PAIR[1],
                "WEBPUSH_VAPID_SUBJECT": "http://v10r.example",
            },
            "mailto:",
        ),
    ],
    ids=["no-private", "no-public", "bad-public", "bad-private", "mismatch", "no-subject", "http"],
)
def test_a_bad_vapid_setting_is_refused_naming_the_variable(monkeypatch, env, message):
    with pytest.raises(Exception, match=message) as caught:
        read_settings(monkeypatch, **env)
    assert type(caught.value).__name__ == "SettingError"


def test_no_keys_at_all_is_a_site_without_web_push(monkeypatch):
    read = read_settings(monkeypatch)
    assert (read["WEBPUSH_VAPID_PUBLIC_KEY"], read["WEBPUSH_VAPID_PRIVATE_KEY"]) == ("", "")


# --- Sends, by a real drain, to a push service on loopback -------------------------------


@pytest.fixture
def peer(tmp_path):
    made = PushPeer(tmp_path)
    yield made
    made.stop()


@pytest.fixture
def wired(settings, peer):
    """The settings `manage.py vapid_keys` printed, with loopback allowed and the peer's
    certificate trusted."""
    for name, value in printed_keys("--subject", SUBJECT).items():
        setattr(settings, name, value)
    settings.WEBPUSH_ALLOW_LOOPBACK = True
    settings.WEBPUSH_CA_FILE = str(peer.ca_file)
    # The peer listens on a free port, not 443.
    settings.WEBPUSH_ENDPOINT_PORTS = (443, peer.port)
    channels._load.cache_clear()
    yield peer
    for channel in channels.configured().values():
        channel.close()
    channels._load.cache_clear()


def device(user, peer, name: str) -> ChannelAddress:
    sub = peer.subscribe(name)
    address = ChannelAddress.objects.create(user=user, channel="webpush", address=sub.endpoint)
    PushSubscription.objects.create(address=address, p256dh=sub.p256dh, auth=sub.auth_text)
    return address


def drain() -> None:
    call_command("drain_outbox", "--once", stdout=io.StringIO())


def row():
    (delivery,) = NotificationDelivery.objects.filter(channel="webpush")
    return delivery


def test_a_push_sent_by_drain_outbox_decrypts_to_the_message_in_the_recipients_language(
    transactional_db, wired, user
):
    Recipient.objects.update_or_create(user=user, defaults={"language": "ru"})
    device(user, wired, "phone")
    notification = notify(user, channels=["webpush"], label="Привет")
    drain()
    (push,) = wired.pushes
    assert push.problems == []
    rendered = catalogue.render(
        key=notification.message_key, params={"label": "Привет"}, language="ru"
    )
    assert push.payload == {
        "title": rendered.subject,
        "body": rendered.body,
        "url": push.payload["url"],
        "icon": "/static/icons/icon-192.png",
        "lang": "ru",
    }
    assert push.payload["url"] in ("", notification.action_url)
    # The default lane is normal: a day to reach a device that is offline.
    assert (push.headers["urgency"], push.headers["ttl"]) == ("normal", "86400")
    delivery = row()
    assert delivery.status == "sent"
    assert delivery.provider_message_id == f"{wired.url}/message/0"


@pytest.mark.parametrize("status", [404, 410])
def test_a_gone_subscription_is_deactivated_and_not_retried(transactional_db, wired, user, status):
    address = device(user, wired, "old")
    wired.statuses["/push/old"] = status
    notify(user, channels=["webpush"])
    drain()
    assert (row().status, row().error_code) == ("failed", "WEBPUSH_GONE")
    address.refresh_from_db()
    assert not address.is_active
    assert address.deactivated_reason.startswith("WEBPUSH_GONE")


def test_a_429_requeues_the_push_throttled_without_spending_an_attempt(
    transactional_db, wired, user
):
    device(user, wired, "phone")
    wired.statuses["/push/phone"] = 429
    notify(user, channels=["webpush"])
    drain()
    delivery = row()
    # Throttled: back in the queue, its attempt handed back (attempt_base moves with it).
    assert (delivery.status, delivery.error_code) == ("pending", "THROTTLED")
    assert (delivery.attempts, delivery.attempt_base, delivery.throttles) == (1, 1, 1)


def test_a_5xx_is_retried(transactional_db, wired, user):
    device(user, wired, "phone")
    wired.statuses["/push/phone"] = 500
    notify(user, channels=["webpush"])
    drain()
    delivery = row()
    assert (delivery.status, delivery.error_code, delivery.attempts) == ("pending", "HTTP_500", 1)
    assert delivery.attempt_base == 0 and delivery.next_attempt_at is not None


def test_two_devices_both_receive_and_a_gone_one_alone_is_deactivated(
    transactional_db, wired, user
):
    phone, laptop, old = (device(user, wired, name) for name in ("phone", "laptop", "old"))
    wired.statuses["/push/old"] = 410
    notify(user, channels=["webpush"])
    drain()
    assert sorted(p.path for p in wired.pushes) == ["/push/laptop", "/push/old", "/push/phone"]
    assert all(p.problems == [] for p in wired.pushes)
    assert row().status == "sent"
    active = set(ChannelAddress.objects.filter(is_active=True).values_list("pk", flat=True))
    assert active == {phone.pk, laptop.pk}


def test_an_endpoint_on_a_port_no_longer_allowed_is_refused_at_send(
    transactional_db, wired, settings, user
):
    settings.WEBPUSH_ENDPOINT_PORTS = (443,)
    channels._load.cache_clear()
    device(user, wired, "phone")  # stored while its port was allowed
    notify(user, channels=["webpush"])
    drain()
    assert (row().status, row().error_code) == ("failed", "WEBPUSH_PORT")
    assert f"port {wired.port}" in row().error_message
    assert wired.pushes == [] and wired.accepted == 0


def test_an_endpoint_on_a_private_address_is_refused_at_send(
    transactional_db, wired, settings, user
):
    settings.WEBPUSH_ALLOW_LOOPBACK = False
    channels._load.cache_clear()
    device(user, wired, "phone")
    notify(user, channels=["webpush"])
    drain()
    assert (row().status, row().error_code) == ("failed", "UNSAFE_ADDRESS")
    assert wired.pushes == [] and wired.accepted == 0


def test_without_keys_the_check_warns_and_pushes_fail_permanently(
    transactional_db, wired, settings, user
):
    settings.WEBPUSH_VAPID_PUBLIC_KEY = settings.WEBPUSH_VAPID_PRIVATE_KEY = ""
    channels._load.cache_clear()
    (warning,) = [m for m in checks.run_checks() if m.id == "transports.W010"]
    assert "WEBPUSH_VAPID_PRIVATE_KEY" in warning.msg
    device(user, wired, "phone")
    notify(user, channels=["webpush"])
    drain()
    assert (row().status, row().error_code) == ("failed", "WEBPUSH_NO_KEYS")
    assert wired.pushes == []


def test_one_device_accepting_is_sent_and_the_failing_one_stays_subscribed(
    transactional_db, wired, user
):
    phone, laptop = device(user, wired, "phone"), device(user, wired, "laptop")
    wired.statuses["/push/laptop"] = 500
    notify(user, channels=["webpush"])
    drain()
    # Not retried: the phone shows it already, and a retry would show it there twice.
    assert (row().status, row().attempts) == ("sent", 1)
    assert ChannelAddress.objects.filter(pk__in=[phone.pk, laptop.pk], is_active=True).count() == 2


def test_none_accepting_retries_and_still_deactivates_the_gone_one(transactional_db, wired, user):
    phone = device(user, wired, "phone")
    device(user, wired, "old")
    wired.statuses.update({"/push/phone": 500, "/push/old": 410})
    notify(user, channels=["webpush"])
    drain()
    assert (row().status, row().error_code) == ("pending", "HTTP_500")
    assert list(ChannelAddress.objects.filter(is_active=True)) == [phone]


def test_a_high_priority_push_is_urgent_and_short_lived(transactional_db, wired, user):
    device(user, wired, "phone")
    enqueue.send_notification(
        user=user, type="test.note", params={"label": "x"}, channels=["webpush"], priority="high"
    )
    drain()
    (push,) = wired.pushes
    assert (push.headers["urgency"], push.headers["ttl"]) == ("high", str(6 * 3600))


@pytest.mark.parametrize(
    ("action_url", "sent"),
    [
        ("/account/inbox/", "/account/inbox/"),
        ("https://v10r.example/account/?tab=1", "/account/?tab=1"),
        ("https://evil.example/account/", ""),
        ("//evil.example/", ""),
        ("javascript:alert(1)", ""),
    ],
)
def test_the_target_url_is_sent_only_as_a_same_origin_path(settings, action_url, sent):
    settings.SITE_ORIGIN = "https://v10r.example"
    assert webpush.same_origin_path(action_url) == sent


def test_a_long_body_is_cut_to_fit_what_push_services_accept():
    outgoing = make_outgoing(channel="webpush", address="https://push.example/x", body="ж" * 5000)
    payload = webpush.payload(outgoing)
    assert len(payload) <= webpush.MAX_PLAINTEXT_BYTES
    assert json.loads(payload)["body"].endswith("…")


# --- From a subscription, as the centre stores it, to the push ------------------------------


def test_a_subscription_stored_by_subscribe_gets_the_push_and_follows_its_new_owner(
    transactional_db, wired, user, django_user_model
):
    sub = wired.subscribe("shared")
    stored = {"endpoint": sub.endpoint, "p256dh": sub.p256dh, "auth": sub.auth_text}
    subscriptions.subscribe(user, **stored)
    notify(user, channels=["webpush"], label="first")
    drain()
    (first,) = wired.pushes
    assert first.problems == [] and first.path == "/push/shared"
    # Another person signs in on the same browser and turns push on: the endpoint is theirs
    # now, and the first user's pushes no longer reach it (with no device left, skipped).
    other = django_user_model.objects.create_user("other", email="other@example.com")
    subscriptions.subscribe(other, **stored)
    notify(user, channels=["webpush"], label="not yours")
    notify(other, channels=["webpush"], label="second")
    drain()
    assert len(wired.pushes) == 2
    assert "second" in json.dumps(wired.pushes[1].payload, ensure_ascii=False)
    by_user = dict(
        NotificationDelivery.objects.filter(
            notification__message_params__label__in=["not yours", "second"]
        ).values_list("notification__user__username", "status")
    )
    assert by_user == {"reader": "skipped", "other": "sent"}


def test_two_people_subscribing_one_endpoint_at_once_leave_it_one_owner(
    transactional_db, wired, django_user_model
):
    sub = wired.subscribe("raced")
    people = [
        django_user_model.objects.create_user(f"racer{i}", email=f"racer{i}@example.com")
        for i in range(4)
    ]
    start = threading.Barrier(len(people))
    errors = []

    def race(person):
        try:
            start.wait(timeout=10)
            subscriptions.subscribe(
                person, endpoint=sub.endpoint, p256dh=sub.p256dh, auth=sub.auth_text
            )
        except Exception as exc:  # noqa: BLE001 - any error is the finding
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(person,)) for person in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    active = ChannelAddress.objects.filter(channel="webpush", address=sub.endpoint, is_active=True)
    assert active.count() == 1
    assert PushSubscription.objects.filter(address__in=active).count() == 1


# --- Several devices, and each push's own encryption -----------------------------------------


def test_a_push_goes_to_the_newest_max_devices_browsers_and_no_more(transactional_db, wired, user):
    names = [f"device{n}" for n in range(webpush.MAX_DEVICES + 2)]
    for name in names:
        device(user, wired, name)
    notify(user, channels=["webpush"])
    drain()
    assert sorted(p.path for p in wired.pushes) == sorted(
        f"/push/{name}" for name in names[-webpush.MAX_DEVICES :]
    )
    assert row().status == "sent"


@pytest.mark.parametrize("first", ["throttled", "broken"])
def test_a_429_from_one_push_service_and_a_5xx_from_another_is_a_failure_not_a_throttle(
    transactional_db, wired, user, first
):
    # Created in both orders: the verdict must not depend on which device answers first.
    names = ["throttled", "broken"] if first == "throttled" else ["broken", "throttled"]
    for name in names:
        device(user, wired, name)
    wired.statuses.update({"/push/throttled": 429, "/push/broken": 500})
    notify(user, channels=["webpush"])
    drain()
    assert len(wired.pushes) == 2
    delivery = row()
    # A throttle would hand the attempt back (attempt_base 1, throttles 1); a 500 spends it.
    assert (delivery.status, delivery.error_code) == ("pending", "HTTP_500")
    assert (delivery.attempts, delivery.attempt_base, delivery.throttles) == (1, 0, 0)


def test_each_push_is_encrypted_under_a_fresh_salt_and_key_pair(wired):
    sub = wired.subscribe("phone")
    plaintext = b'{"title":"same"}'
    bodies = [webpush.encrypt(plaintext, p256dh=sub.p256dh, auth=sub.auth_text) for _ in "ab"]
    # RFC 8188 §2.1: the header is salt (16 bytes), record size (4), key id length (1), key id.
    salts = {body[:16] for body in bodies}
    senders = {body[21 : 21 + body[20]] for body in bodies}
    assert len(salts) == 2 and len(senders) == 2
    assert all(
        decrypt(body, private_key=sub.private_key, auth=sub.auth) == plaintext for body in bodies
    )
