"""Telegram: the Bot API's sendMessage, in Telegram's HTML, to the chat id the user gave.

The address is the chat id (a number; negative for groups) or a channel's @username. The
bot token sits in every URL's path, so it is kept out of every error message.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import escape

from notifications.channels import http
from notifications.channels.base import AddressSource, Channel, ChannelError, Outgoing, SendResult

DEFAULT_BASE_URL = "https://api.telegram.org"
# sendMessage's limit on a message's text, after entity parsing.
TEXT_LIMIT = 4096
# What the subject may take of it, so that a long one still leaves room for the body.
SUBJECT_LIMIT = 512
_CHAT_ID = re.compile(r"-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31}")


class TelegramChannel(Channel):
    """Sends through a bot; without a token every send fails, permanently, saying so."""

    name = "telegram"
    address_source = AddressSource.CHANNEL_ADDRESS

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        token: str | None = None,
        connect_timeout: timedelta = timedelta(seconds=5),
        total_timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        self.client = http.Client(connect_timeout=connect_timeout, total_timeout=total_timeout)

    @classmethod
    def from_settings(cls) -> TelegramChannel:
        from django.conf import settings

        return cls(
            base_url=settings.TELEGRAM_API_BASE_URL,
            token=settings.TELEGRAM_BOT_TOKEN,
            connect_timeout=timedelta(seconds=settings.DELIVERY_HTTP_CONNECT_TIMEOUT),
            total_timeout=timedelta(seconds=settings.DELIVERY_HTTP_TOTAL_TIMEOUT),
        )

    @property
    def worst_case(self) -> timedelta:
        return self.client.worst_case

    def send(self, outgoing: Outgoing) -> SendResult:
        token = self._token()
        chat = outgoing.address.strip()
        if not _CHAT_ID.fullmatch(chat):
            raise ChannelError(
                "BAD_ADDRESS",
                f"{outgoing.address[:64]!r} is not a Telegram chat id or @channel name.",
                retryable=False,
            )
        payload = {
            "chat_id": chat,
            "text": message_text(
                subject=outgoing.subject, body=outgoing.body, action_url=outgoing.action_url
            ),
            "parse_mode": "HTML",
        }
        response = self._call(token, "sendMessage", payload)
        # A 2xx is a sent message even when its body did not arrive whole: sending again
        # would send it twice. The id is then the delivery's own.
        result = _result(response)
        message_id = result.get("message_id")
        if isinstance(message_id, int) and not isinstance(message_id, bool):
            return SendResult(provider_message_id=str(message_id))
        return SendResult(provider_message_id=f"delivery-{outgoing.delivery_id}")

    def probe(self) -> http.Probe:
        """Ask getMe who the bot is: the round trip's seconds and the bot's @username."""
        token = self._token()
        response = self._call(token, "getMe", None)
        username = _result(response).get("username")
        if not isinstance(username, str) or not username:
            raise http.HttpChannelError(
                "TELEGRAM_BAD_REPLY", "getMe answered without a bot username.", retryable=True
            )
        return http.Probe(seconds=response.seconds, name=f"@{username}")

    def _token(self) -> str:
        if not self.token:
            raise http.HttpChannelError(
                "TELEGRAM_NO_TOKEN",
                "No Telegram bot token is configured, so nothing can be sent to Telegram.",
                retryable=False,
            )
        return self.token

    def _call(self, token: str, method: str, payload: dict | None) -> http.Response:
        url = f"{self.base_url}/bot{token}/{method}"
        if payload is None:
            response = self.client.request("GET", url, secrets=(token,))
        else:
            response = self.client.request(
                "POST",
                url,
                headers={"Content-Type": "application/json"},
                body=json.dumps(payload, ensure_ascii=False).encode(),
                secrets=(token,),
            )
        if error := http.classify(response, peer=http.Peer.TELEGRAM, secrets=(token,)):
            raise error
        return response

    def close_idle(self) -> None:
        self.client.close_idle()

    def close(self) -> None:
        self.client.close()


def message_text(*, subject: str, body: str, action_url: str) -> str:
    """Return the message as Telegram HTML: the subject in bold, the body, then the link;
    every part escaped, and the whole within TEXT_LIMIT (the body gives way first)."""
    subject = http.clip(subject, units=SUBJECT_LIMIT)
    parts = [p for p in (subject, action_url) if p]
    room = TEXT_LIMIT - sum(len(p.encode("utf-16-le")) // 2 for p in parts) - 2 * len(parts)
    body = http.clip(body, units=max(room, 0))
    html = []
    if subject:
        html.append(f"<b>{escape(subject)}</b>")
    if body:
        html.append(escape(body))
    if action_url.startswith(("https://", "http://")):
        html.append(f'<a href="{escape(action_url)}">{escape(action_url)}</a>')
    elif action_url:  # a relative link cannot be followed from a chat: shown, not linked
        html.append(escape(action_url))
    return "\n\n".join(html)


def _result(response: http.Response) -> dict:
    payload = response.json()
    result = payload.get("result") if isinstance(payload, dict) else None
    return result if isinstance(result, dict) else {}
