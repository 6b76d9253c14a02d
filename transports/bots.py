"""What the chat bot channels (Telegram, Discord) share: a bot token from the settings, JSON
requests to the provider's API within one deadline per send, the token kept out of every
error message, and a probe that asks the API who the bot is.

A subclass says only what differs: where the API is and which settings hold its URL and
token, how the token goes into a request, what an address looks like, how a message maps to
the requests that send it and the reply to a message id, and which endpoint names the bot.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from typing import Any, ClassVar

from django.core.exceptions import ValidationError

from transports import http
from transports.base import AddressSource, Channel, ChannelError, Outgoing, Probe, SendResult


class BotChannel(Channel):
    """Sends through a bot; without a token every send fails, permanently, saying so."""

    address_source = AddressSource.CHANNEL_ADDRESS
    probes = True
    title: ClassVar[str]  # the provider's name, as an error message says it
    peer: ClassVar[http.Peer]  # whose replies these are, for classify
    default_base_url: ClassVar[str]
    base_url_setting: ClassVar[str]
    token_setting: ClassVar[str]
    user_agent: ClassVar[str] = http.USER_AGENT
    address_pattern: ClassVar[re.Pattern]  # a whole address, once stripped
    address_kind: ClassVar[str]  # what an address is, for the error when it is not one
    identity_path: ClassVar[str]  # the endpoint that says who the bot is
    # What a person who typed an address that is not one reads (translated).
    address_error: ClassVar[Any]

    def clean_address(self, address: str) -> str:
        address = (address or "").strip()
        if not self.address_pattern.fullmatch(address):
            raise ValidationError(self.address_error)
        return address

    def __init__(
        self,
        *,
        base_url: str | None = None,
        token: str | None = None,
        connect_timeout: timedelta = timedelta(seconds=5),
        total_timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.token = token or None
        self.client = http.Client(
            connect_timeout=connect_timeout, total_timeout=total_timeout, user_agent=self.user_agent
        )

    @classmethod
    def from_settings(cls) -> BotChannel:
        from django.conf import settings

        return cls(
            base_url=getattr(settings, cls.base_url_setting),
            token=getattr(settings, cls.token_setting),
            connect_timeout=timedelta(seconds=settings.DELIVERY_HTTP_CONNECT_TIMEOUT),
            total_timeout=timedelta(seconds=settings.DELIVERY_HTTP_TOTAL_TIMEOUT),
        )

    @property
    def worst_case(self) -> timedelta:
        # One deadline covers every request of a send.
        return self.client.worst_case

    def send(self, outgoing: Outgoing) -> SendResult:
        token = self._token()
        recipient = outgoing.address.strip()
        if not self.address_pattern.fullmatch(recipient):
            raise ChannelError(
                "BAD_ADDRESS",
                f"{outgoing.address[:64]!r} is not {self.address_kind}.",
                retryable=False,
            )
        message_id = self.deliver(
            token, recipient=recipient, outgoing=outgoing, deadline=self.client.deadline()
        )
        # A 2xx is a sent message even when its body did not arrive whole: sending again
        # would send it twice. The id is then the delivery's own.
        return SendResult(provider_message_id=message_id or f"delivery-{outgoing.delivery_id}")

    def deliver(self, token: str, *, recipient: str, outgoing: Outgoing, deadline: float) -> str:
        """Send the message to recipient (the address, checked) through call, every request
        within deadline; return the provider's message id, or "" when the reply lacks it."""
        raise NotImplementedError

    def bot_name(self, response: http.Response) -> str:
        """The bot's name in the identity endpoint's reply, or "" when it does not say."""
        raise NotImplementedError

    def probe(self) -> Probe:
        """Ask the API who the bot is: the round trip's seconds and the bot's name."""
        token = self._token()
        response = self.call(token, "GET", self.identity_path)
        name = self.bot_name(response)
        if not name:
            raise http.HttpChannelError(
                f"{self.name.upper()}_BAD_REPLY",
                f"{self.identity_path} answered without a bot username.",
                retryable=True,
            )
        return Probe(seconds=response.seconds, name=name)

    def account(self) -> str:
        """A short hash of the bot token: each bot has its own budget at the provider, and
        the key that names it (stored, shown to staff) must not hold the token itself."""
        if not self.token:
            return ""
        return hashlib.sha256(self.token.encode()).hexdigest()[:12]

    def pace(self):
        # Without a token no send reaches the provider: nothing to pace.
        return super().pace() if self.token else None

    def _token(self) -> str:
        if not self.token:
            raise http.HttpChannelError(
                f"{self.name.upper()}_NO_TOKEN",
                f"No {self.title} bot token is configured, so nothing can be sent to {self.title}.",
                retryable=False,
            )
        return self.token

    def url(self, token: str, path: str) -> str:
        """The URL of one of the API's endpoints; a bot API that takes the token in the
        path puts it here."""
        return f"{self.base_url}{path}"

    def authorization(self, token: str) -> dict[str, str]:
        """The headers that carry the token, for a bot API that takes it in a header."""
        return {}

    def call(
        self,
        token: str,
        method: str,
        path: str,
        payload: dict | None = None,
        *,
        deadline: float | None = None,
    ) -> http.Response:
        """Send one request (payload as JSON) and return a 2xx reply; raise the error any
        other reply stands for, with the token redacted."""
        headers = self.authorization(token)
        body = None
        if payload is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(payload, ensure_ascii=False).encode()
        response = self.client.request(
            method,
            self.url(token, path),
            headers=headers,
            body=body,
            deadline=deadline,
            secrets=(token,),
        )
        if error := http.classify(response, peer=self.peer, secrets=(token,)):
            raise error
        return response

    def close_idle(self) -> None:
        self.client.close_idle()

    def close(self) -> None:
        self.client.close()
