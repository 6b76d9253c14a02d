"""The showcase's own channel: "delivers" to the feed on /showcases/workers/.

The feed is read from the outbox itself, so a visitor watches their row move pending →
processing → sent through the same claim, fence and writes as any email. Sending takes a
moment on purpose, so "processing" can be seen; a notification queued with fail=true fails
retryably every time, so "retrying" (and, after five sends, "dead") can be seen too.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils.translation import gettext_lazy as _

from transports.base import (
    AddressSource,
    Channel,
    ChannelError,
    Outgoing,
    QuietHours,
    SendResult,
)

SEND_SECONDS = 0.8
# The channel's name, under which the settings configure it when the showcase is installed
# (v10r/settings.py), and what the showcase caps, feeds and prunes its rows by.
DEMO_CHANNEL = "demo"
# The claim's lane its rows are queued on (priority="demo"), behind every real delivery; the
# settings add it with the channel, and showcases/checks.py says when either is missing.
DEMO_LANE = "demo"


class DemoChannel(Channel):
    name = DEMO_CHANNEL
    label = _("Showcase demo")
    address_source = AddressSource.NONE
    # Sent to the site's own demo user, for visitors to watch: nobody chooses it, nobody is
    # woken by it, and its dead rows died because a visitor asked them to.
    choosable = False
    quiet_hours = QuietHours.NEVER
    needs_attention = False

    @property
    def worst_case(self) -> timedelta:
        return timedelta(seconds=SEND_SECONDS + 1)

    def send(self, outgoing: Outgoing) -> SendResult:
        time.sleep(SEND_SECONDS)
        if outgoing.params.get("fail"):
            raise ChannelError(
                "DEMO_FAILURE", "The visitor asked this delivery to fail.", retryable=True
            )
        return SendResult(provider_message_id=f"demo-{outgoing.delivery_id}")
