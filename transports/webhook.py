"""Webhooks: the notification as signed JSON, POSTed to the URL the user registered.

The URL is the address. Only public addresses are reached (netguard, checked on what the
host name resolves to, at connect time), and the request is signed the Standard Webhooks
way (signing) with the endpoint's active secrets. webhook-id is the delivery's own id, the
same on every retry, so a receiver that saw a delivery already can tell.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Sequence
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from transports import http, netguard, signing
from transports.base import (
    AddressSource,
    Channel,
    ChannelError,
    Outgoing,
    QuietHours,
    SendResult,
)


class WebhookChannel(Channel):
    """Sends to Outgoing.address, signed with Outgoing.secrets (the drain reads them with the
    address), or else with what secrets_for(url) returns.

    allow_loopback lets webhooks reach 127.0.0.1 and ::1, for tests and local development
    only; resolver replaces socket.getaddrinfo, for tests.
    """

    name = "webhook"
    label = _("Webhook")
    address_source = AddressSource.CHANNEL_ADDRESS
    # A machine's endpoint: nobody is woken by it.
    quiet_hours = QuietHours.NEVER
    signed_with_secret = True
    address_label = _("Webhook URL")
    address_input_mode = "url"
    address_help = _(
        "An http(s) address on the public internet. Every request is signed with a "
        "secret shown once, when the address is first saved."
    )

    def clean_address(self, address: str) -> str:
        """Refuse what a send would refuse, for the same reasons: an http(s) URL whose host
        resolves to public addresses only (loopback too where sends may reach it)."""
        address = super().clean_address(address)
        try:
            destination = netguard.parse_url(address)
            self.client.guard.resolve(destination.host, destination.port)
        except netguard.Refused as exc:
            raise ValidationError(exc.translated()) from exc
        except socket.gaierror as exc:
            raise ValidationError(
                _("%(host)s does not resolve: check the name.") % {"host": destination.host}
            ) from exc
        return address

    def __init__(
        self,
        *,
        secrets_for: Callable[[str], Sequence[str]] | None = None,
        connect_timeout: timedelta = timedelta(seconds=5),
        total_timeout: timedelta = timedelta(seconds=10),
        allow_loopback: bool = False,
        resolver: netguard.Resolver = socket.getaddrinfo,
    ) -> None:
        self.secrets_for = secrets_for
        self.client = http.Client(
            connect_timeout=connect_timeout,
            total_timeout=total_timeout,
            guard=netguard.Guard(allow_loopback=allow_loopback, resolver=resolver),
        )

    @classmethod
    def from_settings(cls) -> WebhookChannel:
        from django.conf import settings

        return cls(
            connect_timeout=timedelta(seconds=settings.DELIVERY_HTTP_CONNECT_TIMEOUT),
            total_timeout=timedelta(seconds=settings.DELIVERY_HTTP_TOTAL_TIMEOUT),
            allow_loopback=settings.DELIVERY_WEBHOOK_ALLOW_LOOPBACK,
        )

    @property
    def worst_case(self) -> timedelta:
        return self.client.worst_case

    def send(self, outgoing: Outgoing) -> SendResult:
        url = outgoing.address
        try:
            netguard.parse_url(url)
        except netguard.Refused as exc:
            raise ChannelError("BAD_URL", str(exc), retryable=False) from None
        secrets = list(outgoing.secrets)
        if not secrets and self.secrets_for is not None:
            secrets = list(self.secrets_for(url))
        if not secrets:
            raise ChannelError(
                "WEBHOOK_NO_SECRET",
                "The endpoint has no active signing secret; unsigned requests are never sent.",
                retryable=False,
            )
        # The delivery id itself: the idempotency key a receiver deduplicates retries by.
        msg_id = str(outgoing.delivery_id)
        try:
            body = json.dumps(
                payload(outgoing), ensure_ascii=False, separators=(",", ":"), sort_keys=True
            ).encode()
        except (TypeError, ValueError) as exc:
            raise ChannelError(
                "BAD_MESSAGE", f"Cannot encode as JSON: {exc}", retryable=False
            ) from None
        try:
            signed = signing.headers(msg_id=msg_id, body=body, secrets=secrets)
        except ValueError as exc:  # the message says what is wrong, never the secret
            raise ChannelError("WEBHOOK_BAD_SECRET", str(exc), retryable=False) from None
        response = self.client.request(
            "POST",
            url,
            headers={"Content-Type": "application/json", **signed},
            body=body,
            secrets=secrets,
        )
        if error := http.classify(response, peer=http.Peer.WEBHOOK, secrets=secrets):
            raise error
        return SendResult(provider_message_id=msg_id)

    def close_idle(self) -> None:
        self.client.close_idle()

    def close(self) -> None:
        self.client.close()


def payload(outgoing: Outgoing) -> dict:
    """Return what a receiver gets: the notification's type, message key and parameters,
    the text rendered in the recipient's language, and the delivery's id."""
    return {
        "type": outgoing.type,
        "key": outgoing.message_key,
        "params": dict(outgoing.params),
        "subject": outgoing.subject,
        "body": outgoing.body,
        "action_url": outgoing.action_url,
        "language": outgoing.language,
        "delivery_id": outgoing.delivery_id,
    }
