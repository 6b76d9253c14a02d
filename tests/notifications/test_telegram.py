"""The Telegram channel against a Bot API of our own on loopback: what only Telegram does.
What every bot channel does alike is in test_bots.py."""

from __future__ import annotations

import pytest

from tests.helpers import make_outgoing
from tests.httppeers import Behaviour, BotCase, TelegramPeer, bot_fixtures
from transports import http
from transports.base import Outgoing
from transports.telegram import TEXT_LIMIT, TelegramChannel, message_text

TOKEN = "123456:AAE-test_token-0123456789abcdef"

bot, api, channel = bot_fixtures(BotCase(TelegramPeer, TelegramChannel, token=TOKEN))


def outgoing(**overrides) -> Outgoing:
    fields = {
        "address": "4242",
        "subject": "Welcome, <friend>",
        "body": 'Tom & Jerry said "hi" <script>alert(1)</script>',
        "action_url": "https://v10r.example/n/7?a=1&b=<2>",
    }
    return make_outgoing(channel="telegram", **{**fields, **overrides})


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


def test_a_redirect_names_its_location_with_the_token_redacted(api, channel):
    api.behaviour = Behaviour.REDIRECT
    with pytest.raises(http.HttpChannelError) as caught:
        channel.send(outgoing())
    assert f"{api.url}/moved/bot[redacted]/sendMessage" in caught.value.message
    assert TOKEN.split(":")[1] not in str(caught.value)


@pytest.mark.parametrize("address", ["-1001234567890", "@v10r_news", " 4242 "])
def test_groups_and_channels_are_addresses_too(api, channel, address):
    channel.send(outgoing(address=address))
    assert api.messages[0]["chat_id"] == address.strip()


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
