"""A channel that sends nothing, for measuring the queue itself."""

from __future__ import annotations

from datetime import timedelta

from transports.base import Channel, Outgoing, SendResult


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
