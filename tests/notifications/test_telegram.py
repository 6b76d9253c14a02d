"""The Telegram channel against a Bot API of our own on loopback, in each of its moods."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from notifications.channels import http
from notifications.channels.base import ChannelError, Outgoing
from notifications.channels.telegram import TEXT_LIMIT, TelegramChannel, message_text
from tests.httppeers import (
    MISBEHAVIOUR_FIELDS,
    Behaviour,
    TelegramPeer,
    bot_fixtures,
    bot_misbehaviours,
)

TOKEN = "123456:AAE-test_token-0123456789abcdef"
# Longer than the peer's second between trickled bytes, so no per-read timeout can be what
# cuts a trickle: only the deadline.
DEADLINE = 1.5
SLACK = 0.5


api, channel = bot_fixtures(TelegramPeer, TelegramChannel, token=TOKEN, deadline=DEADLINE)


def outgoing(**overrides) -> Outgoing:
    fields = {
        "delivery_id": 7,
        "channel": "telegram",
        "address": "4242",
        "subject": "Welcome, <friend>",
        "body": 'Tom & Jerry said "hi" <script>alert(1)</script>',
        "action_url": "https://v10r.example/n/7?a=1&b=<2>",
        "language": "en",
    }
    return Outgoing(**{**fields, **overrides})


def failure(channel: TelegramChannel, message: Outgoing | None = None) -> http.HttpChannelError:
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(message or outgoing())
    assert TOKEN not in str(caught.value)
    assert TOKEN.split(":")[1] not in caught.value.message
    return caught.value


def test_a_message_goes_to_the_chat_as_escaped_html(api, channel):
    result = channel.send(outgoing())
    assert result.provider_message_id == "101"
    [sent] = api.messages
    assert (sent["chat_id"], sent["parse_mode"]) == ("4242", "HTML")
    assert sent["text"] == (
        "<b>Welcome, &lt;friend&gt;</b>\n\n"
        "Tom &amp; Jerry said &quot;hi&quot; &lt;script&gt;alert(1)&lt;/script&gt;\n\n"
        '<a href="https://v10r.example/n/7?a=1&amp;b=&lt;2&gt;">'
        "https://v10r.example/n/7?a=1&amp;b=&lt;2&gt;</a>"
    )
    assert api.requests[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    MISBEHAVIOUR_FIELDS, bot_misbehaviours(rate_limit_wait=timedelta(seconds=7))
)
def test_each_misbehaviour_is_the_error_it_means_and_never_shows_the_token(
    api, channel, behaviour, code, retryable, retry_after, deactivate
):
    api.behaviour = behaviour
    error = failure(channel)
    assert (error.code, error.retryable) == (code, retryable)
    assert error.retry_after == retry_after
    assert error.deactivate_address is deactivate
    assert len(api.requests) == 1  # nothing retried or followed in the same send


def test_a_blocked_bot_says_so_in_telegrams_words(api, channel):
    api.behaviour = Behaviour.BLOCKED
    assert "bot was blocked by the user" in failure(channel).message


def test_a_redirect_names_its_location_with_the_token_redacted(api, channel):
    api.behaviour = Behaviour.REDIRECT
    error = failure(channel)
    assert f"{api.url}/moved/bot[redacted]/sendMessage" in error.message


def test_a_reply_that_trickles_a_byte_a_second_is_cut_at_the_deadline(api, channel):
    api.behaviour = Behaviour.TRICKLE
    started = time.monotonic()
    error = failure(channel)
    assert (error.code, error.retryable) == ("HTTP_TIMEOUT", True)
    assert time.monotonic() - started < DEADLINE + SLACK


def test_a_200_whose_body_is_cut_off_is_still_sent(api, channel):
    """Telegram said 200: the message is in the chat, and sending again would repeat it."""
    api.behaviour = Behaviour.DROP_BODY
    assert channel.send(outgoing()).provider_message_id == "delivery-7"
    assert len(api.messages) == 1


def test_a_wrong_token_is_refused_permanently_without_showing_it(api):
    wrong = TOKEN.replace("AAE", "XXX")
    channel = TelegramChannel(base_url=api.base_url, token=wrong)
    try:
        with pytest.raises(http.HttpChannelError) as caught:
            channel.send(outgoing())
    finally:
        channel.close()
    assert (caught.value.code, caught.value.retryable) == ("HTTP_401", False)
    assert wrong not in str(caught.value)


def test_without_a_token_every_send_fails_permanently_and_nothing_is_sent(api):
    channel = TelegramChannel(base_url=api.base_url, token=None)
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(outgoing())
    assert (caught.value.code, caught.value.retryable) == ("TELEGRAM_NO_TOKEN", False)
    assert "token" in caught.value.message
    with pytest.raises(http.HttpChannelError, match="TELEGRAM_NO_TOKEN"):
        channel.probe()
    assert api.requests == []


@pytest.mark.parametrize("address", ["", "not a chat", "12ab", "@abc", "https://t.me/x"])
def test_an_address_that_is_no_chat_id_fails_permanently(api, channel, address):
    with pytest.raises(ChannelError) as caught:
        channel.send(outgoing(address=address))
    assert (caught.value.code, caught.value.retryable) == ("BAD_ADDRESS", False)
    assert api.requests == []


@pytest.mark.parametrize("address", ["-1001234567890", "@v10r_news", " 4242 "])
def test_groups_and_channels_are_addresses_too(api, channel, address):
    channel.send(outgoing(address=address))
    assert api.messages[0]["chat_id"] == address.strip()


def test_sends_on_one_thread_share_one_connection_until_closed(api, channel, monkeypatch):
    for delivery_id in range(3):
        channel.send(outgoing(delivery_id=delivery_id))
    assert (len(api.messages), api.accepted) == (3, 1)
    monkeypatch.setattr(http, "IDLE_SECONDS", 3600)
    channel.close_idle()
    assert channel.client.open_connections() == 1
    monkeypatch.setattr(http, "IDLE_SECONDS", 0)
    channel.close_idle()
    assert api.wait_for_open_connections(0) == 0
    channel.send(outgoing())
    channel.close()
    assert api.wait_for_open_connections(0) == 0
    assert api.accepted == 2


def test_probe_asks_getme_for_the_bots_name(api, channel):
    probe = channel.probe()
    assert probe.name == "@v10r_bot"
    assert 0 < probe.seconds < DEADLINE
    assert api.requests[0].path == f"/bot{TOKEN}/getMe"


def test_probe_raises_what_went_wrong(api, channel):
    api.behaviour = Behaviour.UNAVAILABLE
    with pytest.raises(http.HttpChannelError) as caught:
        channel.probe()
    assert caught.value.code == "HTTP_503"


def test_worst_case_is_the_deadline_and_a_second(channel):
    assert channel.worst_case == timedelta(seconds=DEADLINE + 1)


def test_a_long_body_is_cut_to_telegrams_limit_and_the_link_survives():
    url = "https://v10r.example/x"
    text = message_text(subject="S", body="é" * 10_000, action_url=url)
    subject, body, link = text.split("\n\n")
    assert subject == "<b>S</b>"
    assert body.endswith("…")
    # Telegram counts the text after entity parsing: the subject, the body, the link's
    # text, and the two blank lines between them.
    assert len("S") + 2 + len(body) + 2 + len(url) == TEXT_LIMIT
    assert link == f'<a href="{url}">{url}</a>'


@pytest.mark.parametrize(
    ("action_url", "ending"),
    [
        ("", "body"),
        ("/notifications/7", "body\n\n/notifications/7"),  # relative: shown, not linked
        ("javascript:alert(1)", "body\n\njavascript:alert(1)"),
    ],
)
def test_only_a_web_url_becomes_a_link(action_url, ending):
    text = message_text(subject="", body="body", action_url=action_url)
    assert text == ending
