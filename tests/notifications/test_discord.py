"""The Discord channel against a REST API of our own on loopback: what only Discord does.
What every bot channel does alike is in test_bots.py."""

from __future__ import annotations

import time

import pytest

from tests.helpers import make_outgoing
from tests.httppeers import BOT_DEADLINE, Behaviour, BotCase, DiscordPeer, bot_fixtures
from transports import http
from transports.base import Outgoing
from transports.discord import DiscordChannel, message

TOKEN = "MTA0NjQ2.test-discord-token.0123456789abcdef"
SLACK = 0.5

bot, api, channel = bot_fixtures(BotCase(DiscordPeer, DiscordChannel, token=TOKEN))


def outgoing(**overrides) -> Outgoing:
    fields = {"address": "80351110224678912", "body": "Hello @everyone, see <#general>"}
    return make_outgoing(channel="discord", **{**fields, **overrides})


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


def test_a_user_who_cannot_be_messaged_is_blocked_after_the_dm_channel_opens(api, channel):
    api.behaviour = Behaviour.BLOCKED
    error = failure(channel)
    assert "Cannot send messages to this user" in error.message
    assert [r.path.rsplit("/", 1)[-1] for r in api.requests] == ["channels", "messages"]


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
    assert time.monotonic() - started < BOT_DEADLINE + SLACK


def test_a_dm_channel_reply_cut_short_fails_retryably_before_anything_is_posted(api, channel):
    api.behaviour = Behaviour.DROP_BODY
    error = failure(channel)
    assert (error.code, error.retryable) == ("DISCORD_BAD_REPLY", True)
    assert len(api.requests) == 1
    assert api.messages == []


def test_an_embed_keeps_to_discords_limits_and_links_only_web_urls():
    sent = message(subject="t" * 300, body="d" * 5000, action_url="/relative")
    [embed] = sent["embeds"]
    assert (len(embed["title"]), len(embed["description"])) == (256, 4096)
    assert embed["title"].endswith("…")
    assert "url" not in embed
