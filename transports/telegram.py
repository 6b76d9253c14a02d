"""Telegram: the Bot API's sendMessage, in Telegram's HTML, to the chat id the user gave.

The address is the chat id (a number; negative for groups) or a channel's @username. The
bot token sits in every URL's path, so it is kept out of every error message.
"""

from __future__ import annotations

import re
from html import escape

from django.utils.translation import gettext_lazy as _

from transports import http
from transports.base import Outgoing
from transports.bots import BotChannel

DEFAULT_BASE_URL = "https://api.telegram.org"
# sendMessage's limit on a message's text, after entity parsing.
TEXT_LIMIT = 4096
# What the subject may take of it, so that a long one still leaves room for the body.
SUBJECT_LIMIT = 512
_CHAT_ID = re.compile(r"-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31}")


class TelegramChannel(BotChannel):
    name = "telegram"
    label = _("Telegram")
    address_label = _("Telegram chat id")
    address_help = _("A number, or @ and a name; your chat with the site’s bot has one.")
    address_error = _("A Telegram chat id is a number, or @ and a name.")
    required_settings = ("TELEGRAM_BOT_TOKEN",)
    title = "Telegram"
    peer = http.Peer.TELEGRAM
    default_base_url = DEFAULT_BASE_URL
    base_url_setting = "TELEGRAM_API_BASE_URL"
    token_setting = "TELEGRAM_BOT_TOKEN"
    address_pattern = _CHAT_ID
    address_kind = "a Telegram chat id or @channel name"
    identity_path = "getMe"

    def url(self, token: str, path: str) -> str:
        return f"{self.base_url}/bot{token}/{path}"

    def deliver(self, token: str, *, recipient: str, outgoing: Outgoing, deadline: float) -> str:
        payload = {
            "chat_id": recipient,
            "text": message_text(
                subject=outgoing.subject, body=outgoing.body, action_url=outgoing.action_url
            ),
            "parse_mode": "HTML",
        }
        response = self.call(token, "POST", "sendMessage", payload, deadline=deadline)
        message_id = _result(response).get("message_id")
        if isinstance(message_id, int) and not isinstance(message_id, bool):
            return str(message_id)
        return ""

    def bot_name(self, response: http.Response) -> str:
        username = _result(response).get("username")
        return f"@{username}" if isinstance(username, str) and username else ""


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
