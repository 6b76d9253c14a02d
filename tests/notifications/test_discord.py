"""The Discord channel against a REST API of our own on loopback, in each of its moods."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from notifications.channels import http
from notifications.channels.base import ChannelError, Outgoing
from notifications.channels.discord import DiscordChannel, message
from tests.httppeers import (
    MISBEHAVIOUR_FIELDS,
    Behaviour,
    DiscordPeer,
    bot_fixtures,
    bot_misbehaviours,
)

TOKEN = "MTA0NjQ2.test-discord-token.0123456789abcdef"
# Longer than the peer's second between trickled bytes: only the deadline can cut.
DEADLINE = 1.5
SLACK = 0.5


api, channel = bot_fixtures(DiscordPeer, DiscordChannel, token=TOKEN, deadline=DEADLINE)


def outgoing(**overrides) -> Outgoing:
    fields = {
        "delivery_id": 7,
        "channel": "discord",
        "address": "80351110224678912",
        "subject": "Welcome",
        "body": "Hello @everyone, see <#general>",
        "action_url": "https://v10r.example/n/7",
        "language": "en",
    }
    return Outgoing(**{**fields, **overrides})


def failure(channel: DiscordChannel) -> http.HttpChannelError:
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(outgoing())
    assert TOKEN not in str(caught.value)
    return caught.value


def test_a_message_opens_the_dm_channel_then_posts_one_embed_to_it(api, channel):
    result = channel.send(outgoing())
    assert result.provider_message_id == "7000001"
    opened, posted = api.requests
    assert (opened.method, opened.path) == ("POST", "/api/v10/users/@me/channels")
    assert opened.json() == {"recipient_id": "80351110224678912"}
    assert posted.path == "/api/v10/channels/9000000/messages"
    assert {r.headers["authorization"] for r in api.requests} == {f"Bot {TOKEN}"}
    assert opened.headers["user-agent"].startswith("DiscordBot (")
    [sent] = api.messages
    assert sent["recipient"] == "80351110224678912"
    assert sent["payload"] == {
        "embeds": [
            {
                "title": "Welcome",
                "description": "Hello @everyone, see <#general>",
                "url": "https://v10r.example/n/7",
            }
        ],
        "allowed_mentions": {"parse": []},  # @everyone in a body pings nobody
    }
    assert api.accepted == 1  # both requests on one connection


# The header's whole seconds win over the body's 2.5.
@pytest.mark.parametrize(
    MISBEHAVIOUR_FIELDS, bot_misbehaviours(rate_limit_wait=timedelta(seconds=3))
)
def test_each_misbehaviour_is_the_error_it_means_and_never_shows_the_token(
    api, channel, behaviour, code, retryable, retry_after, deactivate
):
    api.behaviour = behaviour
    error = failure(channel)
    assert (error.code, error.retryable) == (code, retryable)
    assert error.retry_after == retry_after
    assert error.deactivate_address is deactivate
    assert api.messages == []


def test_a_user_who_cannot_be_messaged_is_blocked_after_the_dm_channel_opens(api, channel):
    api.behaviour = Behaviour.BLOCKED
    error = failure(channel)
    assert "Cannot send messages to this user" in error.message
    assert [r.path.rsplit("/", 1)[-1] for r in api.requests] == ["channels", "messages"]


def test_a_reply_that_trickles_a_byte_a_second_is_cut_at_the_deadline(api, channel):
    api.behaviour = Behaviour.TRICKLE
    started = time.monotonic()
    error = failure(channel)
    assert (error.code, error.retryable) == ("HTTP_TIMEOUT", True)
    assert time.monotonic() - started < DEADLINE + SLACK
    assert len(api.requests) == 1  # the deadline was spent opening the DM channel


def test_both_requests_share_one_deadline(api, channel):
    """Opening the DM channel takes a second; the post then trickles. The send ends at the
    deadline that started with the first request, not at one restarted for the second."""
    api.behaviour_of = lambda request: (
        Behaviour.TRICKLE if request.path.endswith("/messages") else Behaviour.SLOW
    )
    started = time.monotonic()
    error = failure(channel)
    assert error.code == "HTTP_TIMEOUT"
    assert len(api.requests) == 2
    assert time.monotonic() - started < DEADLINE + SLACK


def test_a_dm_channel_reply_cut_short_fails_retryably_before_anything_is_posted(api, channel):
    api.behaviour = Behaviour.DROP_BODY
    error = failure(channel)
    assert (error.code, error.retryable) == ("DISCORD_BAD_REPLY", True)
    assert len(api.requests) == 1
    assert api.messages == []


def test_a_200_to_the_post_whose_body_is_cut_off_is_still_sent(api, channel):
    """Discord said 200: the message is in the DM, and sending again would repeat it."""
    api.behaviour_of = lambda request: (
        Behaviour.DROP_BODY if request.path.endswith("/messages") else Behaviour.OK
    )
    assert channel.send(outgoing()).provider_message_id == "delivery-7"
    assert len(api.messages) == 1


def test_without_a_token_every_send_fails_permanently_and_nothing_is_sent(api):
    channel = DiscordChannel(base_url=api.base_url, token="")
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(outgoing())
    assert (caught.value.code, caught.value.retryable) == ("DISCORD_NO_TOKEN", False)
    with pytest.raises(http.HttpChannelError, match="DISCORD_NO_TOKEN"):
        channel.probe()
    assert api.requests == []


def test_a_wrong_token_is_refused_permanently_without_showing_it(api):
    channel = DiscordChannel(base_url=api.base_url, token="not-the-token")
    try:
        with pytest.raises(http.HttpChannelError) as caught:
            channel.send(outgoing())
    finally:
        channel.close()
    assert (caught.value.code, caught.value.retryable) == ("HTTP_401", False)
    assert "not-the-token" not in str(caught.value)


@pytest.mark.parametrize("address", ["", "someone#1234", "@someone", "1" * 21])
def test_an_address_that_is_no_user_id_fails_permanently(api, channel, address):
    with pytest.raises(ChannelError) as caught:
        channel.send(outgoing(address=address))
    assert (caught.value.code, caught.value.retryable) == ("BAD_ADDRESS", False)
    assert api.requests == []


def test_sends_on_one_thread_share_one_connection_until_closed(api, channel, monkeypatch):
    for delivery_id in range(3):
        channel.send(outgoing(delivery_id=delivery_id))
    assert (len(api.requests), len(api.messages), api.accepted) == (6, 3, 1)
    monkeypatch.setattr(http, "IDLE_SECONDS", 0)
    channel.close_idle()
    assert api.wait_for_open_connections(0) == 0
    channel.send(outgoing())
    channel.close()
    assert api.wait_for_open_connections(0) == 0
    assert api.accepted == 2


def test_probe_asks_who_the_bot_is(api, channel):
    probe = channel.probe()
    assert probe.name == "v10r-bot"
    assert 0 < probe.seconds < DEADLINE
    assert (api.requests[0].method, api.requests[0].path) == ("GET", "/api/v10/users/@me")


def test_probe_raises_what_went_wrong(api, channel):
    api.behaviour = Behaviour.RATE_LIMITED
    with pytest.raises(http.HttpChannelError) as caught:
        channel.probe()
    assert (caught.value.code, caught.value.retry_after) == ("HTTP_429", timedelta(seconds=3))


def test_worst_case_is_the_deadline_and_a_second(channel):
    assert channel.worst_case == timedelta(seconds=DEADLINE + 1)


def test_an_embed_keeps_to_discords_limits_and_links_only_web_urls():
    sent = message(subject="t" * 300, body="d" * 5000, action_url="/relative")
    [embed] = sent["embeds"]
    assert (len(embed["title"]), len(embed["description"])) == (256, 4096)
    assert embed["title"].endswith("…")
    assert "url" not in embed
