"""What every bot channel does alike, against its provider's API of our own on loopback, for
Telegram and for Discord: each test here runs once per bot. What one bot does on its own is
in test_telegram.py and test_discord.py."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta

import pytest

from tests.helpers import make_outgoing
from tests.httppeers import (
    BOT_DEADLINE,
    Behaviour,
    BotCase,
    DiscordPeer,
    TelegramPeer,
    bot_fixtures,
    check_one_connection_until_closed,
)
from transports import http
from transports.base import ChannelError, Outgoing
from transports.discord import DiscordChannel
from transports.telegram import TelegramChannel

SLACK = 0.5


@dataclass(frozen=True)
class Bot(BotCase):
    address: str  # a recipient the channel takes
    secret: str  # the part of the token that no error may show
    wrong_token: str  # a token of the right form that the peer refuses
    rate_limit_wait: timedelta  # what the peer's 429 asks for, as the channel reads it
    blocked_words: str  # how the peer says the recipient blocked the bot
    requests_per_send: int
    post_path: str  # how the path of the request that posts the message ends
    probe_name: str
    probe_request: tuple[str, str]  # the probe's method and path
    bad_addresses: tuple[str, ...]


TELEGRAM_TOKEN = "123456:AAE-test_token-0123456789abcdef"
DISCORD_TOKEN = "MTA0NjQ2.test-discord-token.0123456789abcdef"
TELEGRAM = Bot(
    peer_class=TelegramPeer,
    channel_class=TelegramChannel,
    token=TELEGRAM_TOKEN,
    address="4242",
    secret=TELEGRAM_TOKEN.split(":")[1],
    wrong_token=TELEGRAM_TOKEN.replace("AAE", "XXX"),
    rate_limit_wait=timedelta(seconds=7),
    blocked_words="bot was blocked by the user",
    requests_per_send=1,
    post_path="/sendMessage",
    probe_name="@v10r_bot",
    probe_request=("GET", f"/bot{TELEGRAM_TOKEN}/getMe"),
    bad_addresses=("", "not a chat", "12ab", "@abc", "https://t.me/x"),
)
DISCORD = Bot(
    peer_class=DiscordPeer,
    channel_class=DiscordChannel,
    token=DISCORD_TOKEN,
    address="80351110224678912",
    secret=DISCORD_TOKEN,
    wrong_token=DISCORD_TOKEN.replace("test", "fake"),
    # The header's whole seconds win over the body's 2.5.
    rate_limit_wait=timedelta(seconds=3),
    blocked_words="Cannot send messages to this user",
    requests_per_send=2,  # open the DM channel, then post to it
    post_path="/messages",
    probe_name="v10r-bot",
    probe_request=("GET", "/api/v10/users/@me"),
    bad_addresses=("", "someone#1234", "@someone", "1" * 21),
)

bot, api, channel = bot_fixtures(TELEGRAM, DISCORD)


def outgoing(bot: Bot, **overrides) -> Outgoing:
    return make_outgoing(channel=bot.name, **{"address": bot.address, **overrides})


def failure(bot: Bot, channel) -> http.HttpChannelError:
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(outgoing(bot))
    assert bot.token not in str(caught.value)
    assert bot.secret not in caught.value.message
    return caught.value


@pytest.mark.parametrize(
    ("behaviour", "code", "retryable", "waits", "deactivate"),
    [
        (Behaviour.RATE_LIMITED, "HTTP_429", True, True, False),
        (Behaviour.UNAVAILABLE, "HTTP_503", True, False, False),
        (Behaviour.BLOCKED, "BOT_BLOCKED", False, False, True),
        (Behaviour.GONE, "HTTP_410", False, False, False),
        (Behaviour.BAD_REQUEST, "HTTP_400", False, False, False),
        (Behaviour.REDIRECT, "HTTP_REDIRECT", False, False, False),
        (Behaviour.DROP, "HTTP_NETWORK", True, False, False),
    ],
)
def test_each_misbehaviour_is_the_error_it_means_and_never_shows_the_token(
    bot, api, channel, behaviour, code, retryable, waits, deactivate
):
    api.behaviour = behaviour
    error = failure(bot, channel)
    assert (error.code, error.retryable) == (code, retryable)
    assert error.retry_after == (bot.rate_limit_wait if waits else None)
    assert error.deactivate_address is deactivate
    # Nothing retried or followed in the same send: a misbehaviour meets the first request,
    # but for a block, which meets the post (Discord's comes after the DM channel opens).
    reached = bot.requests_per_send if behaviour == Behaviour.BLOCKED else 1
    assert len(api.requests) == reached


def test_a_blocked_bot_says_so_in_the_providers_words(bot, api, channel):
    api.behaviour = Behaviour.BLOCKED
    assert bot.blocked_words in failure(bot, channel).message


def test_a_reply_that_trickles_a_byte_a_second_is_cut_at_the_deadline(bot, api, channel):
    api.behaviour = Behaviour.TRICKLE
    started = time.monotonic()
    error = failure(bot, channel)
    assert (error.code, error.retryable) == ("HTTP_TIMEOUT", True)
    assert time.monotonic() - started < BOT_DEADLINE + SLACK
    assert len(api.requests) == 1  # the deadline was spent on the first request


def test_a_200_to_the_post_whose_body_is_cut_off_is_still_sent(bot, api, channel):
    """The provider said 200: the message is out, and sending again would repeat it."""
    api.behaviour_of = lambda request: (
        Behaviour.DROP_BODY if request.path.endswith(bot.post_path) else Behaviour.OK
    )
    assert channel.send(outgoing(bot)).provider_message_id == "delivery-7"
    assert len(api.messages) == 1


def test_a_wrong_token_is_refused_permanently_without_showing_it(bot, api):
    channel = bot.channel_class(base_url=api.base_url, token=bot.wrong_token)
    try:
        with pytest.raises(http.HttpChannelError) as caught:
            channel.send(outgoing(bot))
    finally:
        channel.close()
    assert (caught.value.code, caught.value.retryable) == ("HTTP_401", False)
    assert bot.wrong_token not in str(caught.value)


@pytest.mark.parametrize("token", [None, ""])
def test_without_a_token_every_send_fails_permanently_and_nothing_is_sent(bot, api, token):
    channel = bot.channel_class(base_url=api.base_url, token=token)
    code = f"{bot.name.upper()}_NO_TOKEN"
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(outgoing(bot))
    assert (caught.value.code, caught.value.retryable) == (code, False)
    assert "token" in caught.value.message
    with pytest.raises(http.HttpChannelError, match=code):
        channel.probe()
    assert api.requests == []


@pytest.mark.parametrize(
    ("bot", "address"),
    [
        pytest.param(case, address, id=f"{case.name}-{address}")
        for case in (TELEGRAM, DISCORD)
        for address in case.bad_addresses
    ],
    indirect=["bot"],
)
def test_an_address_the_provider_would_not_take_fails_permanently(bot, api, channel, address):
    with pytest.raises(ChannelError) as caught:
        channel.send(outgoing(bot, address=address))
    assert (caught.value.code, caught.value.retryable) == ("BAD_ADDRESS", False)
    assert api.requests == []


def test_sends_on_one_thread_share_one_connection_until_closed(bot, api, channel, monkeypatch):
    check_one_connection_until_closed(
        channel,
        api,
        outgoing=lambda **fields: outgoing(bot, **fields),
        monkeypatch=monkeypatch,
        requests_per_send=bot.requests_per_send,
    )
    assert len(api.messages) == 4


def test_probe_asks_the_api_who_the_bot_is(bot, api, channel):
    probe = channel.probe()
    assert probe.name == bot.probe_name
    assert 0 < probe.seconds < BOT_DEADLINE
    [asked] = api.requests
    assert (asked.method, asked.path) == bot.probe_request


@pytest.mark.parametrize(
    ("behaviour", "code", "waits"),
    [(Behaviour.UNAVAILABLE, "HTTP_503", False), (Behaviour.RATE_LIMITED, "HTTP_429", True)],
)
def test_probe_raises_what_went_wrong(bot, api, channel, behaviour, code, waits):
    api.behaviour = behaviour
    with pytest.raises(http.HttpChannelError) as caught:
        channel.probe()
    assert caught.value.code == code
    assert caught.value.retry_after == (bot.rate_limit_wait if waits else None)


def test_worst_case_is_the_deadline_and_a_second(channel):
    assert channel.worst_case == timedelta(seconds=BOT_DEADLINE + 1)
