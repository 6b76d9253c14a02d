"""A channel that sends nothing, for measuring the queue itself."""

from __future__ import annotations

from datetime import timedelta

from transports.base import AddressSource, Channel, Outgoing, QuietHours, SendResult


class NoopChannel(Channel):
    name = "noop"
    address_source = "none"
    renders = False
    local = True

    @property
    def worst_case(self) -> timedelta:
        return timedelta(milliseconds=1)

    def send(self, outgoing: Outgoing) -> SendResult:
        return SendResult(provider_message_id=f"noop-{outgoing.delivery_id}")


class NoopEmailChannel(NoopChannel):
    """The email channel as the queue sees it (the user's address, held by quiet hours when
    the recipient asks), sending nothing: recipients without an address, or who turned email
    off, are decided as for real email."""

    name = "email"
    address_source = AddressSource.EMAIL
    quiet_hours = QuietHours.WHEN_ASKED
