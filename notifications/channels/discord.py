"""Discord: a direct message from the bot, as one embed (title, description, link).

The address is the recipient's user id. A bot cannot message a user id directly: it opens
(or gets back, since Discord keeps one per user) the DM channel first, then posts to it.
Both requests share one deadline and, on a kept connection, one TCP connection.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

from notifications.channels import http
from notifications.channels.base import AddressSource, Channel, ChannelError, Outgoing, SendResult

DEFAULT_BASE_URL = "https://discord.com/api/v10"
# Discord asks bots for a User-Agent of the form "DiscordBot ($url, $version)".
USER_AGENT = "DiscordBot (v10r, 0.1)"
# An embed's limits on its title and description.
TITLE_LIMIT = 256
DESCRIPTION_LIMIT = 4096
_SNOWFLAKE = re.compile(r"\d{1,20}")


class DiscordChannel(Channel):
    """Sends through a bot; without a token every send fails, permanently, saying so."""

    name = "discord"
    address_source = AddressSource.CHANNEL_ADDRESS

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        token: str | None = None,
        connect_timeout: timedelta = timedelta(seconds=5),
        total_timeout: timedelta = timedelta(seconds=10),
        user_agent: str = USER_AGENT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        self.client = http.Client(
            connect_timeout=connect_timeout, total_timeout=total_timeout, user_agent=user_agent
        )

    @classmethod
    def from_settings(cls) -> DiscordChannel:
        from django.conf import settings

        return cls(
            base_url=settings.DISCORD_API_BASE_URL,
            token=settings.DISCORD_BOT_TOKEN,
            connect_timeout=timedelta(seconds=settings.DELIVERY_HTTP_CONNECT_TIMEOUT),
            total_timeout=timedelta(seconds=settings.DELIVERY_HTTP_TOTAL_TIMEOUT),
        )

    @property
    def worst_case(self) -> timedelta:
        # One deadline covers both requests.
        return self.client.worst_case

    def send(self, outgoing: Outgoing) -> SendResult:
        token = self._token()
        user_id = outgoing.address.strip()
        if not _SNOWFLAKE.fullmatch(user_id):
            raise ChannelError(
                "BAD_ADDRESS",
                f"{outgoing.address[:64]!r} is not a Discord user id.",
                retryable=False,
            )
        deadline = self.client.deadline()
        opened = self._call(
            token, "POST", "/users/@me/channels", {"recipient_id": user_id}, deadline=deadline
        )
        channel_id = _field(opened, "id")
        if channel_id is None or not _SNOWFLAKE.fullmatch(channel_id):
            # Nothing has been posted yet, so trying again cannot send twice.
            raise http.HttpChannelError(
                "DISCORD_BAD_REPLY",
                "Opening the DM channel answered without its id.",
                retryable=True,
            )
        posted = self._call(
            token,
            "POST",
            f"/channels/{channel_id}/messages",
            message(subject=outgoing.subject, body=outgoing.body, action_url=outgoing.action_url),
            deadline=deadline,
        )
        # Posted even if the reply was cut short; the id is then the delivery's own.
        return SendResult(
            provider_message_id=_field(posted, "id") or f"delivery-{outgoing.delivery_id}"
        )

    def probe(self) -> http.Probe:
        """Ask who the bot is (GET /users/@me): the round trip's seconds and its username."""
        token = self._token()
        response = self._call(token, "GET", "/users/@me", None, deadline=None)
        username = _field(response, "username")
        if not username:
            raise http.HttpChannelError(
                "DISCORD_BAD_REPLY", "/users/@me answered without a username.", retryable=True
            )
        return http.Probe(seconds=response.seconds, name=username)

    def _token(self) -> str:
        if not self.token:
            raise http.HttpChannelError(
                "DISCORD_NO_TOKEN",
                "No Discord bot token is configured, so nothing can be sent to Discord.",
                retryable=False,
            )
        return self.token

    def _call(
        self, token: str, method: str, path: str, payload: dict | None, *, deadline: float | None
    ) -> http.Response:
        headers = {"Authorization": f"Bot {token}"}
        body = None
        if payload is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(payload, ensure_ascii=False).encode()
        response = self.client.request(
            method,
            f"{self.base_url}{path}",
            headers=headers,
            body=body,
            deadline=deadline,
            secrets=(token,),
        )
        if error := http.classify(response, peer=http.Peer.DISCORD, secrets=(token,)):
            raise error
        return response

    def close_idle(self) -> None:
        self.client.close_idle()

    def close(self) -> None:
        self.client.close()


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


def _field(response: http.Response, name: str) -> str | None:
    payload = response.json()
    value = payload.get(name) if isinstance(payload, dict) else None
    return value if isinstance(value, str) and value else None
