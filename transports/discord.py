"""Discord: a direct message from the bot, as one embed (title, description, link).

The address is the recipient's user id. A bot cannot message a user id directly: it opens
(or gets back, since Discord keeps one per user) the DM channel first, then posts to it.
Both requests share one deadline and, on a kept connection, one TCP connection.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext_lazy as _

from transports import http
from transports.base import Outgoing
from transports.bots import BotChannel

DEFAULT_BASE_URL = "https://discord.com/api/v10"
# Discord asks bots for a User-Agent of the form "DiscordBot ($url, $version)".
USER_AGENT = "DiscordBot (v10r, 0.1)"
# An embed's limits on its title and description.
TITLE_LIMIT = 256
DESCRIPTION_LIMIT = 4096
_SNOWFLAKE = re.compile(r"\d{1,20}")


class DiscordChannel(BotChannel):
    name = "discord"
    label = _("Discord")
    address_label = _("Discord user id")
    address_help = _("A number of up to 20 digits (Discord’s “Copy User ID”).")
    address_error = _("A Discord user id is a number of up to 20 digits.")
    required_settings = ("DISCORD_BOT_TOKEN",)
    title = "Discord"
    peer = http.Peer.DISCORD
    default_base_url = DEFAULT_BASE_URL
    base_url_setting = "DISCORD_API_BASE_URL"
    token_setting = "DISCORD_BOT_TOKEN"
    user_agent = USER_AGENT
    address_pattern = _SNOWFLAKE
    address_kind = "a Discord user id"
    identity_path = "/users/@me"

    def authorization(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bot {token}"}

    def deliver(self, token: str, *, recipient: str, outgoing: Outgoing, deadline: float) -> str:
        opened = self.call(
            token, "POST", "/users/@me/channels", {"recipient_id": recipient}, deadline=deadline
        )
        channel_id = _field(opened, "id")
        if not _SNOWFLAKE.fullmatch(channel_id):
            # Nothing has been posted yet, so trying again cannot send twice.
            raise http.HttpChannelError(
                "DISCORD_BAD_REPLY",
                "Opening the DM channel answered without its id.",
                retryable=True,
            )
        posted = self.call(
            token,
            "POST",
            f"/channels/{channel_id}/messages",
            message(subject=outgoing.subject, body=outgoing.body, action_url=outgoing.action_url),
            deadline=deadline,
        )
        return _field(posted, "id")

    def bot_name(self, response: http.Response) -> str:
        return _field(response, "username")


def message(*, subject: str, body: str, action_url: str) -> dict:
    """Return the message to post: one embed, within Discord's limits, that mentions
    nobody (a body that says @everyone must not ping a server)."""
    embed = {
        "title": http.clip(subject, units=TITLE_LIMIT),
        "description": http.clip(body, units=DESCRIPTION_LIMIT),
    }
    if action_url.startswith(("https://", "http://")):  # an embed's url must be absolute
        embed["url"] = action_url
    return {"embeds": [embed], "allowed_mentions": {"parse": []}}


def _field(response: http.Response, name: str) -> str:
    """A non-empty string field of the reply's JSON object, or ""."""
    payload = response.json()
    value = payload.get(name) if isinstance(payload, dict) else None
    return value if isinstance(value, str) else ""
