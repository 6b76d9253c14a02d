import base64
import socket
import threading
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from recipients import subscriptions
from recipients.models import WEBPUSH, ChannelAddress, PushSubscription
from tests.helpers import backend_pid, poll, waits_for_a_lock

pytestmark = pytest.mark.django_db


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def browser_key() -> str:
    """A fresh P-256 public key, uncompressed, as PushSubscription.toJSON() gives it."""
    public = ec.generate_private_key(ec.SECP256R1()).public_key()
    return b64url(
        public.public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
    )


AUTH = b64url(bytes(range(16)))


def public_resolver(host, port, *, type=socket.SOCK_STREAM):
    """Names resolve to a public address (the machine has no DNS); a few are private."""
    address = {"private.example": "10.0.0.5", "metadata.example": "169.254.169.254"}.get(
        host, "93.184.215.14"
    )
    return [(socket.AF_INET, type, 6, "", (address, port))]


def subscribe(user, endpoint="https://push.example/send/abc", **keys):
    keys = {"p256dh": browser_key(), "auth": AUTH} | keys
    return subscriptions.subscribe(user, endpoint=endpoint, resolver=public_resolver, **keys)


@pytest.fixture
def other(django_user_model):
    return django_user_model.objects.create_user("other", email="other@example.com")


def test_a_subscription_is_a_webpush_address_with_its_keys(user):
    key = browser_key()
    address = subscribe(user, p256dh=key, user_agent="Firefox")
    assert (address.channel, address.address, address.is_active) == (
        WEBPUSH,
        "https://push.example/send/abc",
        True,
    )
    stored = address.push_subscription
    assert (stored.p256dh, stored.auth, stored.user_agent) == (key, AUTH, "Firefox")


def test_subscribing_again_updates_the_keys_in_the_same_row(user):
    first = subscribe(user)
    key = browser_key()
    again = subscribe(user, p256dh=key)
    assert again.pk == first.pk
    assert PushSubscription.objects.get(address=first).p256dh == key
    assert ChannelAddress.objects.filter(channel=WEBPUSH).count() == 1


def test_several_browsers_are_several_addresses(user):
    subscribe(user, "https://push.example/send/one")
    subscribe(user, "https://push.example/send/two")
    assert ChannelAddress.objects.filter(user=user, channel=WEBPUSH).count() == 2


def test_the_same_endpoint_from_another_user_moves_to_them(user, other):
    # The browser hands the next person the subscription it holds: the same keys.
    key = browser_key()
    first = subscribe(user, p256dh=key)
    moved = subscribe(other, p256dh=key)
    assert moved.pk == first.pk
    assert ChannelAddress.objects.get(pk=first.pk).user == other
    assert not ChannelAddress.objects.filter(user=user, channel=WEBPUSH).exists()


@pytest.mark.parametrize("changed", ["p256dh", "auth"])
def test_an_endpoint_posted_with_other_keys_stays_with_its_owner(user, other, changed):
    key = browser_key()
    first = subscribe(user, p256dh=key)
    keys = {"p256dh": key, "auth": AUTH} | (
        {"p256dh": browser_key()} if changed == "p256dh" else {"auth": b64url(bytes(16))}
    )
    with pytest.raises(ValidationError, match="belongs to another account"):
        subscribe(other, **keys)
    assert ChannelAddress.objects.get(pk=first.pk).user == user
    assert PushSubscription.objects.get(address=first).p256dh == key


def test_the_cap_refuses_one_more_browser_with_a_clear_message(user):
    for n in range(subscriptions.MAX_SUBSCRIPTIONS):
        subscribe(user, f"https://push.example/send/{n}")
    with pytest.raises(ValidationError, match="20 browsers already"):
        subscribe(user, "https://push.example/send/one-too-many")
    # Renewing one already counted is not one more.
    subscribe(user, "https://push.example/send/0")


def test_unsubscribe_touches_only_the_users_own_row(user, other):
    subscribe(user)
    assert subscriptions.unsubscribe(other, endpoint="https://push.example/send/abc") is False
    assert ChannelAddress.objects.filter(user=user, channel=WEBPUSH).exists()
    assert subscriptions.unsubscribe(user, endpoint="https://push.example/send/abc") is True
    assert not ChannelAddress.objects.filter(channel=WEBPUSH).exists()
    assert not PushSubscription.objects.exists()
    assert subscriptions.unsubscribe(user, endpoint="https://push.example/send/abc") is False


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("", "has no endpoint"),
        (None, "has no endpoint"),
        (42, "has no endpoint"),
        ("http://push.example/send/abc", "must be an https URL"),
        ("ftp://push.example/x", "Only http and https"),
        ("push.example/send", "not a full URL"),
        ("https://user:pw@push.example/x", "user name or password"),
        ("https://push.example/" + "a" * 500, "longer than 500 characters"),
        ("https://push .example/x", "spaces"),
        ("https://127.0.0.1/x", "loopback"),
        ("https://localhost.localdomain/x", "does not resolve"),
        ("https://push.example:8443/x", "port is 8443; push services are reached on port 443"),
        ("https://push.example:80/x", "port is 80"),
        ("https://0177.0.0.1/x", "loopback"),
        ("https://10.1.2.3/x", "private network"),
        ("https://192.168.1.1/x", "private network"),
        ("https://169.254.169.254/latest/meta-data", "metadata"),
        ("https://[::1]/x", "loopback"),
        ("https://[::ffff:127.0.0.1]/x", "IPv4-mapped"),
        ("https://[::ffff:169.254.169.254]/x", "IPv4-mapped"),
        ("https://[fd00:ec2::254]/x", "unique local"),
        ("https://[fe80::1]/x", "link-local"),
        ("https://private.example/x", "private network"),
        ("https://metadata.example/x", "link-local"),
    ],
)
def test_an_endpoint_that_is_not_a_public_https_url_is_refused(user, endpoint, message):
    def resolver(host, port, *, type=socket.SOCK_STREAM):
        if host == "localhost.localdomain":
            raise socket.gaierror(socket.EAI_NONAME, "no such name")
        return public_resolver(host, port, type=type)

    with pytest.raises(ValidationError, match=message):
        subscriptions.subscribe(
            user, endpoint=endpoint, p256dh=browser_key(), auth=AUTH, resolver=resolver
        )
    assert not ChannelAddress.objects.exists()


def test_loopback_is_allowed_only_where_the_setting_says_so(user, settings):
    settings.WEBPUSH_ALLOW_LOOPBACK = True
    settings.WEBPUSH_ENDPOINT_PORTS = (443, 8443)
    address = subscribe(user, "https://127.0.0.1:8443/push/abc")
    assert address.address == "https://127.0.0.1:8443/push/abc"
    with pytest.raises(ValidationError, match="private network"):
        subscribe(user, "https://10.0.0.1/push/abc")


def not_on_the_curve() -> str:
    # (1, 1) is no point of y² = x³ - 3x + b on P-256.
    return b64url(b"\x04" + (1).to_bytes(32, "big") + (1).to_bytes(32, "big"))


def compressed_key() -> str:
    public = ec.generate_private_key(ec.SECP256R1()).public_key()
    return b64url(
        public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"p256dh": ""}, "not an uncompressed P-256"),
        ({"p256dh": None}, "p256dh is not base64url"),
        ({"p256dh": "not base64!"}, "p256dh is not base64url"),
        ({"p256dh": "é" * 87}, "p256dh is not base64url"),
        ({"p256dh": "A" * 5000}, "p256dh is not base64url"),
        ({"p256dh": b64url(b"\x04" + bytes(63))}, "65 bytes"),
        ({"p256dh": b64url(b"\x05" + bytes(64))}, "65 bytes starting with 0x04"),
        ({"p256dh": not_on_the_curve()}, "not a point on the P-256 curve"),
        ({"p256dh": compressed_key()}, "not an uncompressed"),
        ({"auth": b64url(bytes(15))}, "16-byte secret"),
        ({"auth": b64url(bytes(17))}, "16-byte secret"),
        ({"auth": ["x"]}, "auth is not base64url"),
        ({"auth": "a"}, "auth is not base64url"),
    ],
)
def test_keys_that_are_not_a_p256_point_and_a_16_byte_secret_are_refused(user, keys, message):
    with pytest.raises(ValidationError, match=message):
        subscribe(user, **keys)
    assert not ChannelAddress.objects.exists()


def test_padded_base64url_is_stored_without_its_padding(user):
    key = browser_key()
    address = subscribe(user, p256dh=key + "=", auth=AUTH + "==")
    assert (address.push_subscription.p256dh, address.push_subscription.auth) == (key, AUTH)


def test_an_overlong_user_agent_is_cut_to_the_column(user):
    address = subscribe(user, user_agent="x" * 1000)
    assert len(address.push_subscription.user_agent) == subscriptions.MAX_USER_AGENT_LENGTH


def test_two_spellings_of_one_endpoint_are_one_browser_with_one_owner(user, other):
    key = browser_key()
    first = subscribe(user, endpoint="https://push.example/send/abc?x=1", p256dh=key)
    again = subscribe(other, endpoint="HTTPS://Push.Example:443/send/abc?x=1", p256dh=key)
    assert again.pk == first.pk and again.address == "https://push.example/send/abc?x=1"
    assert list(ChannelAddress.objects.filter(is_active=True).values_list("user", flat=True)) == [
        other.pk
    ]
    assert subscriptions.unsubscribe(other, endpoint="https://PUSH.example:443/send/abc?x=1")
    assert not ChannelAddress.objects.exists()


def test_an_endpoint_with_a_fragment_is_refused(user):
    with pytest.raises(ValidationError, match="#fragment"):
        subscribe(user, endpoint="https://push.example/send/abc#@127.0.0.1/")


def test_a_name_server_that_does_not_answer_holds_a_subscribe_only_the_connect_timeout(
    user, settings
):
    settings.DELIVERY_HTTP_CONNECT_TIMEOUT = 0.2
    answered = threading.Event()

    def silent(host, port, *, type=socket.SOCK_STREAM):
        answered.wait(5)
        return public_resolver(host, port, type=type)

    started = time.monotonic()
    with pytest.raises(ValidationError, match="does not resolve"):
        subscriptions.subscribe(
            user,
            endpoint="https://slow.example/send/1",
            p256dh=browser_key(),
            auth=AUTH,
            resolver=silent,
        )
    answered.set()
    assert time.monotonic() - started < 2
    assert not ChannelAddress.objects.exists()


def test_unsubscribe_all_keeps_one_browser_and_counts_the_others(user):
    kept = subscribe(user)
    subscribe(user, endpoint="https://push.example/send/def")
    subscribe(user, endpoint="https://push.example/send/ghi")
    # Kept by any spelling of its endpoint.
    assert subscriptions.unsubscribe_all(user, keep="HTTPS://Push.Example:443/send/abc") == 2
    assert list(ChannelAddress.objects.values_list("pk", flat=True)) == [kept.pk]
    assert subscriptions.unsubscribe_all(user, keep="not a url") == 1
    assert not ChannelAddress.objects.exists()
    assert not PushSubscription.objects.exists()


def test_two_browsers_subscribing_at_once_cannot_pass_the_cap_together(transactional_db, user):
    """The last place under the cap is taken in an open transaction while a second browser
    subscribes on another connection: the second must wait for it and be refused, not count
    the uncommitted row out and make one too many."""
    for n in range(subscriptions.MAX_SUBSCRIPTIONS - 1):
        subscribe(user, f"https://push.example/send/{n}")
    second: dict = {}

    def subscribe_another_browser():
        try:
            second["pid"] = backend_pid()
            subscribe(user, "https://push.example/send/second")
        except ValidationError as exc:
            second["refused"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=subscribe_another_browser)
    with transaction.atomic():
        subscribe(user, "https://push.example/send/last")
        thread.start()
        # Waiting for this transaction's lock, or (with none to wait for) done already.
        assert poll(
            lambda: not thread.is_alive() or ("pid" in second and waits_for_a_lock(second["pid"]))
        )
    thread.join(timeout=30)
    assert not thread.is_alive()
    active = ChannelAddress.objects.filter(user=user, channel=WEBPUSH, is_active=True)
    assert active.count() == subscriptions.MAX_SUBSCRIPTIONS
    assert second["refused"].code == "too_many"


def test_an_endpoint_on_a_port_of_the_configured_list_is_taken(user, settings):
    with pytest.raises(ValidationError) as refused:
        subscribe(user, "https://push.example:8443/send/abc")
    assert refused.value.messages == [
        "The endpoint's port is 8443; push services are reached on port 443 only."
    ]
    settings.WEBPUSH_ENDPOINT_PORTS = (443, 8443)
    assert subscribe(user, "https://push.example:8443/send/abc").address == (
        "https://push.example:8443/send/abc"
    )
    assert subscribe(user, "https://push.example/send/def").address == (
        "https://push.example/send/def"
    )


def test_a_refused_port_is_said_in_the_users_language(user):
    from django.utils import translation

    with translation.override("de"), pytest.raises(ValidationError) as refused:
        subscribe(user, "https://push.example:8443/send/abc")
    assert refused.value.messages == [
        "Der Port des Endpunkts ist 8443; Push-Dienste werden nur über Port 443 erreicht."
    ]
