"""What a reply means, row by row: sent, retryable (and when), or permanent (and whether the
address or the endpoint goes with it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from transports import http
from transports.http import Peer

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TOKEN = "123456:AAE-secret-token_value"


def reply(status: int, body=b"", *, reason: str = "", **headers: str) -> http.Response:
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return http.Response(
        status=status,
        reason=reason,
        headers={name.replace("_", "-"): value for name, value in headers.items()},
        body=body,
        complete=True,
        seconds=0.01,
    )


TELEGRAM_BLOCKED = {
    "ok": False,
    "error_code": 403,
    "description": "Forbidden: bot was blocked by the user",
}
DISCORD_50007 = {"message": "Cannot send messages to this user", "code": 50007}


@pytest.mark.parametrize(
    ("peer", "response", "code", "retryable", "retry_after", "deactivate"),
    [
        # 2xx: sent, whatever the body says
        (Peer.TELEGRAM, reply(200, {"ok": True}), None, None, None, None),
        (Peer.WEBHOOK, reply(201), None, None, None, None),
        (Peer.WEBHOOK, reply(204), None, None, None, None),
        (Peer.WEBHOOK, reply(299, b"<html>"), None, None, None, None),
        # 3xx: never followed, a configuration error
        (Peer.WEBHOOK, reply(301, Location="https://a/"), "HTTP_REDIRECT", False, None, 0),
        (Peer.WEBHOOK, reply(302, Location="/elsewhere"), "HTTP_REDIRECT", False, None, 0),
        (Peer.TELEGRAM, reply(307), "HTTP_REDIRECT", False, None, False),
        (Peer.DISCORD, reply(308, Location="https://b/"), "HTTP_REDIRECT", False, None, 0),
        # Retryable 4xx and 5xx, with the server's wait (capped at an hour) or none
        (Peer.WEBHOOK, reply(408), "HTTP_408", True, None, False),
        (Peer.WEBHOOK, reply(425), "HTTP_425", True, None, False),
        (Peer.WEBHOOK, reply(429, Retry_After="120"), "HTTP_429", True, 120, False),
        (Peer.WEBHOOK, reply(429, Retry_After="86400"), "HTTP_429", True, 3600, False),
        (Peer.WEBHOOK, reply(429, Retry_After="soon"), "HTTP_429", True, None, False),
        (
            Peer.WEBHOOK,  # an HTTP-date 90 s after NOW
            reply(503, Retry_After="Sun, 01 Mar 2026 12:01:30 GMT"),
            "HTTP_503",
            True,
            90,
            False,
        ),
        (Peer.WEBHOOK, reply(500), "HTTP_500", True, None, False),
        (Peer.WEBHOOK, reply(502), "HTTP_502", True, None, False),
        (Peer.WEBHOOK, reply(504), "HTTP_504", True, None, False),
        (Peer.TELEGRAM, reply(599), "HTTP_599", True, None, False),
        # Telegram's 429 says when in its body too; the header wins when both are there
        (
            Peer.TELEGRAM,
            reply(429, {"ok": False, "parameters": {"retry_after": 7}}),
            "HTTP_429",
            True,
            7,
            False,
        ),
        (
            Peer.TELEGRAM,
            reply(429, {"ok": False, "parameters": {"retry_after": 7}}, Retry_After="9"),
            "HTTP_429",
            True,
            9,
            False,
        ),
        # Discord's body gives fractions of a second; a header that is garbage gives way
        (
            Peer.DISCORD,
            reply(429, {"retry_after": 2.5, "global": False}, Retry_After="2.5"),
            "HTTP_429",
            True,
            2.5,
            False,
        ),
        (Peer.DISCORD, reply(429, {"retry_after": -1}), "HTTP_429", True, None, False),
        (Peer.DISCORD, reply(429, {"retry_after": True}), "HTTP_429", True, None, False),
        # A recipient who blocked the bot: permanent, and the address is switched off
        (Peer.TELEGRAM, reply(403, TELEGRAM_BLOCKED), "BOT_BLOCKED", False, None, True),
        (Peer.TELEGRAM, reply(403), "BOT_BLOCKED", False, None, True),
        (Peer.DISCORD, reply(403, DISCORD_50007), "BOT_BLOCKED", False, None, True),
        (Peer.DISCORD, reply(400, DISCORD_50007), "BOT_BLOCKED", False, None, True),
        (Peer.DISCORD, reply(403, {"code": 50013}), "HTTP_403", False, None, False),
        (Peer.DISCORD, reply(404, DISCORD_50007), "HTTP_404", False, None, False),
        # A webhook's 403 is the receiver refusing us, not a person blocking a bot
        (Peer.WEBHOOK, reply(403, TELEGRAM_BLOCKED), "HTTP_403", False, None, False),
        # 410 from a webhook: the endpoint is gone for good, and its address switched off
        (Peer.WEBHOOK, reply(410), "ENDPOINT_GONE", False, None, True),
        (Peer.TELEGRAM, reply(410), "HTTP_410", False, None, False),
        # Other 4xx: permanent
        (Peer.TELEGRAM, reply(400, {"description": "chat not found"}), "HTTP_400", 0, None, 0),
        (Peer.TELEGRAM, reply(401), "HTTP_401", False, None, False),
        (Peer.DISCORD, reply(404), "HTTP_404", False, None, False),
        (Peer.WEBHOOK, reply(413), "HTTP_413", False, None, False),
        (Peer.WEBHOOK, reply(422), "HTTP_422", False, None, False),
        (Peer.WEBHOOK, reply(451), "HTTP_451", False, None, False),
        # Outside HTTP's classes: nothing to retry
        (Peer.WEBHOOK, reply(600), "HTTP_600", False, None, False),
    ],
)
def test_each_reply_is_classified(peer, response, code, retryable, retry_after, deactivate):
    error = http.classify(response, peer=peer, now=NOW)
    if code is None:
        assert error is None
        return
    assert (error.code, error.retryable) == (code, bool(retryable))
    assert error.status == response.status
    wait = None if retry_after is None else timedelta(seconds=retry_after)
    assert error.retry_after == wait
    assert error.deactivate_address is bool(deactivate)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("0", 0),
        ("7", 7),
        (" 30 ", 30),
        ("3600", 3600),
        ("3601", 3600),  # capped at an hour
        ("99999999999999999999999", 3600),  # no overflow
        ("Sun, 01 Mar 2026 12:00:30 GMT", 30),
        ("Sun, 01 Mar 2026 11:00:00 GMT", 0),  # already past: no wait
        ("Mon, 02 Mar 2026 12:00:00 GMT", 3600),  # a day away: capped
        ("Sun, 01 Mar 2026 12:00:10 -0000", 10),  # no zone: read as UTC
        ("Sunday, 01-Mar-26 12:00:20 GMT", 20),  # RFC 850: obsolete, still to be read
        ("-5", None),
        ("1.5", None),  # delay-seconds are whole
        ("1e3", None),
        ("", None),
        ("soon", None),
        ("Sun, 01 Mar 99999 12:00:00 GMT", None),
    ],
)
def test_retry_after_is_seconds_or_an_http_date_capped_at_an_hour(value, seconds):
    expected = None if seconds is None else timedelta(seconds=seconds)
    assert http.parse_retry_after(value, now=NOW) == expected


def test_a_redirect_names_where_it_pointed_without_the_token():
    location = f"https://api.telegram.org/moved/bot{TOKEN}/sendMessage"
    error = http.classify(
        reply(302, Location=location), peer=Peer.TELEGRAM, now=NOW, secrets=(TOKEN,)
    )
    assert "https://api.telegram.org/moved/bot[redacted]/sendMessage" in error.message
    assert TOKEN not in str(error)


def test_the_providers_description_is_kept_short_printable_and_without_the_token():
    description = f"Bad Request: token {TOKEN} is\nnot\x00allowed " + "x" * 500
    error = http.classify(
        reply(400, {"description": description}, reason="Bad Request"),
        peer=Peer.TELEGRAM,
        secrets=(TOKEN,),
    )
    assert error.message.startswith("400 Bad Request: Bad Request: token [redacted] is not allowed")
    assert len(error.message) <= 200
    assert TOKEN not in error.message


def test_a_percent_encoded_token_is_redacted_too():
    assert (
        http.redact("/bot123456%3AAAE-secret-token_value/x", secrets=[TOKEN]) == "/bot[redacted]/x"
    )


@pytest.mark.parametrize(
    ("text", "units", "clipped"),
    [
        ("hello", 5, "hello"),
        ("hello!", 5, "hell…"),
        ("a😀b", 4, "a😀b"),  # the emoji counts as two
        ("a😀b", 3, "a…"),  # never half an emoji
        ("", 0, ""),
    ],
)
def test_text_is_clipped_in_utf16_units(text, units, clipped):
    assert http.clip(text, units=units) == clipped
