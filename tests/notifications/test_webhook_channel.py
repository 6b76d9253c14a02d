"""The webhook channel against a receiver on loopback that checks every signature with an
implementation of the specification of its own."""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta

import pytest

from tests.httppeers import Behaviour, WebhookReceiver, check_one_connection_until_closed
from transports import signing
from transports.base import ChannelError, Outgoing
from transports.webhook import WebhookChannel

SECRET = "whsec_" + base64.b64encode(b"a webhook key of thirty-two byte").decode()
NEXT = "whsec_" + base64.b64encode(b"the key that replaces it, 32 byt").decode()
# Longer than the receiver's second between trickled bytes: only the deadline can cut.
DEADLINE = 1.5
SLACK = 0.5


@pytest.fixture
def receiver():
    peer = WebhookReceiver(secrets=[SECRET])
    yield peer
    peer.stop()


def make_channel(secrets: list[str] | None, **options) -> WebhookChannel:
    return WebhookChannel(
        secrets_for=(lambda url: secrets) if secrets is not None else None,
        connect_timeout=timedelta(seconds=0.5),
        total_timeout=timedelta(seconds=DEADLINE),
        **{"allow_loopback": True, **options},
    )


@pytest.fixture
def channel():
    made = make_channel([SECRET])
    yield made
    made.close()


def outgoing(receiver: WebhookReceiver, **overrides) -> Outgoing:
    fields = {
        "delivery_id": 7,
        "channel": "webhook",
        "address": f"{receiver.url}/hooks/in?source=v10r",
        "subject": "Welcome, Ada",
        "body": "Glad you're here — «добро пожаловать»",
        "action_url": "https://v10r.example/n/7",
        "language": "ru",
        "params": {"name": "Ada", "count": 3},
    }
    return Outgoing(**{**fields, **overrides})


def failure(channel: WebhookChannel, message: Outgoing) -> ChannelError:
    with pytest.raises(ChannelError) as caught:
        channel.send(message)
    for secret in (SECRET, NEXT):
        assert secret not in str(caught.value)
        assert secret.removeprefix("whsec_") not in str(caught.value)
    return caught.value


def test_a_delivery_is_posted_as_signed_json(receiver, channel):
    result = channel.send(outgoing(receiver))
    assert result.provider_message_id == "7"
    [request] = receiver.requests
    assert (request.method, request.path) == ("POST", "/hooks/in?source=v10r")
    assert request.verified is True
    assert request.headers["content-type"] == "application/json"
    assert request.headers["webhook-id"] == "7"
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 5
    assert json.loads(request.body) == {
        "type": "",
        "key": "",
        "params": {"name": "Ada", "count": 3},
        "subject": "Welcome, Ada",
        "body": "Glad you're here — «добро пожаловать»",
        "action_url": "https://v10r.example/n/7",
        "language": "ru",
        "delivery_id": 7,
    }


def test_while_a_secret_is_rotated_both_sign_and_either_receiver_accepts(receiver):
    channel = make_channel([SECRET, NEXT])
    try:
        channel.send(outgoing(receiver))
        receiver.secrets = [NEXT]  # the receiver has moved on to the new secret
        channel.send(outgoing(receiver, delivery_id=8))
    finally:
        channel.close()
    assert [r.verified for r in receiver.requests] == [True, True]
    assert len(receiver.requests[0].headers["webhook-signature"].split(" ")) == 2


def test_a_receiver_that_does_not_know_the_secret_rejects_the_signature(receiver):
    channel = make_channel([NEXT])
    try:
        channel.send(outgoing(receiver))
    finally:
        channel.close()
    assert receiver.requests[0].verified is False


def test_a_retry_keeps_the_webhook_id_and_signs_afresh(receiver, channel):
    receiver.behaviour = Behaviour.UNAVAILABLE
    failure(channel, outgoing(receiver))
    receiver.behaviour = Behaviour.OK
    channel.send(outgoing(receiver))
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == "7"
    assert second.verified is True
    signing.verify(headers=second.headers, body=second.body, secrets=[SECRET])


@pytest.mark.parametrize(
    ("behaviour", "code", "retryable", "retry_after", "deactivate"),
    [
        (Behaviour.RATE_LIMITED, "HTTP_429", True, timedelta(seconds=120), False),
        (Behaviour.UNAVAILABLE, "HTTP_503", True, None, False),
        (Behaviour.BLOCKED, "HTTP_403", False, None, False),  # no bot, no blocked person
        (Behaviour.GONE, "ENDPOINT_GONE", False, None, True),
        (Behaviour.BAD_REQUEST, "HTTP_400", False, None, False),
        (Behaviour.REDIRECT, "HTTP_REDIRECT", False, None, False),
        (Behaviour.DROP, "HTTP_NETWORK", True, None, False),
    ],
)
def test_each_misbehaviour_is_the_error_it_means(
    receiver, channel, behaviour, code, retryable, retry_after, deactivate
):
    receiver.behaviour = behaviour
    error = failure(channel, outgoing(receiver))
    assert (error.code, error.retryable) == (code, retryable)
    assert error.retry_after == retry_after
    assert error.deactivate_address is deactivate
    assert len(receiver.requests) == 1  # a redirect is not followed


def test_a_redirect_says_where_it_pointed(receiver, channel):
    receiver.behaviour = Behaviour.REDIRECT
    error = failure(channel, outgoing(receiver))
    assert f"{receiver.url}/moved/hooks/in?source=v10r" in error.message


def test_a_reply_that_trickles_a_byte_a_second_is_cut_at_the_deadline(receiver, channel):
    receiver.behaviour = Behaviour.TRICKLE
    started = time.monotonic()
    error = failure(channel, outgoing(receiver))
    assert (error.code, error.retryable) == ("HTTP_TIMEOUT", True)
    assert time.monotonic() - started < DEADLINE + SLACK


def test_a_2xx_cut_off_in_its_body_is_still_sent(receiver, channel):
    receiver.behaviour = Behaviour.DROP_BODY
    assert channel.send(outgoing(receiver)).provider_message_id == "7"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "0x7f.1", "[::ffff:127.0.0.1]"])
def test_loopback_is_refused_unless_allowed_and_nothing_connects(receiver, host):
    channel = make_channel([SECRET], allow_loopback=False)
    try:
        error = failure(channel, outgoing(receiver, address=f"http://{host}:{receiver.port}/"))
    finally:
        channel.close()
    assert (error.code, error.retryable) == ("UNSAFE_ADDRESS", False)
    assert "loopback" in error.message
    assert receiver.accepted == 0


@pytest.mark.parametrize(
    "address",
    [
        "ftp://hooks.example/in",
        "https://user:pass@hooks.example/in",
        "hooks.example/in",
        "http://hooks example/",
    ],
)
def test_a_url_outside_the_rules_fails_permanently_before_any_secret_is_read(address):
    asked = []
    channel = WebhookChannel(secrets_for=lambda url: asked.append(url) or [SECRET])
    with pytest.raises(ChannelError) as caught:
        channel.send(Outgoing(7, "webhook", address, "s", "b", "", "en"))
    assert (caught.value.code, caught.value.retryable) == ("BAD_URL", False)
    assert asked == []


@pytest.mark.parametrize("secrets", [None, []])
def test_an_endpoint_without_a_secret_is_never_sent_to(receiver, secrets):
    channel = make_channel(secrets)
    error = failure(channel, outgoing(receiver))
    assert (error.code, error.retryable) == ("WEBHOOK_NO_SECRET", False)
    assert receiver.requests == []


def test_a_malformed_secret_fails_permanently_without_showing_it(receiver):
    channel = make_channel(["whsec_not*base64*at*all"])
    with pytest.raises(ChannelError) as caught:
        channel.send(outgoing(receiver))
    assert (caught.value.code, caught.value.retryable) == ("WEBHOOK_BAD_SECRET", False)
    assert "not*base64" not in str(caught.value)
    assert receiver.requests == []


def test_sends_to_one_endpoint_share_one_connection_until_closed(receiver, channel, monkeypatch):
    check_one_connection_until_closed(
        channel,
        receiver,
        outgoing=lambda **fields: outgoing(receiver, **fields),
        monkeypatch=monkeypatch,
    )


def test_worst_case_is_the_deadline_and_a_second(channel):
    assert channel.worst_case == timedelta(seconds=DEADLINE + 1)
