"""The site's settings plus a channel that sends nothing (bench/noop.py), for drain_outbox
processes started by tests that measure the queue itself, not a channel."""

from tests.settings import *  # noqa: F403

DELIVERY_CHANNELS = {**DELIVERY_CHANNELS, "noop": "bench.noop.NoopChannel"}  # noqa: F405
