"""Slack: a direct message from the site's Slack app, through the Web API's chat.postMessage.

The address is the recipient's Slack member ID; the bot token is SLACK_BOT_TOKEN.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from transports import http
from transports.base import Channel, ChannelError, Outgoing, SendResult

# A member ID (U…, or W… on Enterprise Grid) is what chat.postMessage's "channel" takes to
# message a person directly.
MEMBER_ID = re.compile(r"[UW][A-Z0-9]{8,20}")
# Slack's "ok": false errors that say this recipient cannot be messaged, now or later.
GONE = {"channel_not_found", "user_not_found", "account_inactive", "user_disabled"}


class SlackChannel(Channel):
    name = "slack"
    label = _("Slack")
    address_label = _("Slack member ID")
    address_help = _("In Slack: your profile, ⋮, “Copy member ID”. It starts with U or W.")
    required_settings = ("SLACK_BOT_TOKEN",)
    # Everything else is Channel's default: recipients choose it category by category, their
    # quiet hours hold it (a phone buzzes), the address is a ChannelAddress they type.

    def __init__(self, *, token: str, base_url: str, timeout: timedelta) -> None:
        self.token = token
        self.base_url = base_url.rstrip("/")
        # The channels' HTTP client: one deadline covers the whole request.
        self.client = http.Client(connect_timeout=timeout, total_timeout=timeout)

    @classmethod
    def from_settings(cls) -> SlackChannel:
        return cls(
            token=getattr(settings, "SLACK_BOT_TOKEN", ""),
            base_url=getattr(settings, "SLACK_API_BASE_URL", "https://slack.com/api"),
            timeout=timedelta(seconds=settings.DELIVERY_HTTP_TOTAL_TIMEOUT),
        )

    def clean_address(self, address: str) -> str:
        address = (address or "").strip()
        if not MEMBER_ID.fullmatch(address):
            raise ValidationError(_("A Slack member ID is U or W, then capitals and digits."))
        return address

    @property
    def worst_case(self) -> timedelta:
        return self.client.worst_case

    def send(self, outgoing: Outgoing) -> SendResult:
        if not self.token:
            raise ChannelError("SLACK_NO_TOKEN", "SLACK_BOT_TOKEN is not set.", retryable=False)
        text = "\n".join(
            p for p in (f"*{outgoing.subject}*", outgoing.body, outgoing.action_url) if p
        )
        response = self.client.request(
            "POST",
            f"{self.base_url}/chat.postMessage",
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json; charset=utf-8",
            },
            body=json.dumps({"channel": outgoing.address, "text": text}).encode(),
            secrets=(self.token,),  # kept out of every error message
        )
        if response.status == 429 or response.status >= 500:
            raise ChannelError(
                f"SLACK_HTTP_{response.status}",
                f"Slack answered {response.status}.",
                retryable=True,
                # A 429 is about our rate, not this message: re-queued without spending a try.
                throttled=response.status == 429,
                retry_after=http.parse_retry_after(
                    response.headers.get("Retry-After"), now=datetime.now(UTC)
                ),
            )
        reply = response.json()
        reply = reply if isinstance(reply, dict) else {}
        if response.status != 200 or reply.get("ok") is not True:
            error = str(reply.get("error") or f"HTTP {response.status}")
            raise ChannelError(
                "SLACK_REFUSED",
                f"Slack refused the message: {error}.",
                retryable=False,
                deactivate_address=error in GONE,
            )
        # The message's timestamp is its id in Slack; a 200 without one was still sent.
        return SendResult(provider_message_id=str(reply.get("ts") or outgoing.delivery_id))

    def close_idle(self) -> None:
        self.client.close_idle()

    def close(self) -> None:
        self.client.close()
