"""Channels for tests: each behaves one way, and remembers what it was asked to send."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from transports.base import (
    AddressSource,
    Channel,
    ChannelError,
    Outgoing,
    QuietHours,
    SendResult,
)


class Recorder(Channel):
    """Keeps what each send records, by default its Outgoing (class-wide, so tests can read
    it), thread-safely."""

    address_source = AddressSource.NONE
    # The tests' own channels stand for no one's phone: quiet hours hold them only where a test
    # says so (a channel's default, ALWAYS, is for channels that reach people).
    quiet_hours = QuietHours.NEVER
    seen: list = []
    lock = threading.Lock()

    @property
    def worst_case(self) -> timedelta:
        return timedelta(seconds=1)

    def record(self, seen) -> None:
        with self.lock:
            type(self).seen.append(seen)

    @classmethod
    def reset(cls) -> None:
        cls.seen = []


class RecordingChannel(Recorder):
    name = "recording"

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(outgoing)
        return SendResult(provider_message_id=f"rec-{outgoing.delivery_id}")


class AlwaysRetryableChannel(Recorder):
    """An upstream that is always down: every send fails, retryably."""

    name = "always_retryable"

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(outgoing)
        raise ChannelError("UPSTREAM_503", "Service Unavailable", retryable=True)


class RejectingChannel(Recorder):
    name = "rejecting"

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(outgoing)
        raise ChannelError("BAD_ADDRESS", "No such recipient", retryable=False)


class ExplodingChannel(Recorder):
    """A channel with a bug in it."""

    name = "exploding"

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(outgoing)
        raise RuntimeError("a bug in the channel")


class BlockedChannel(Recorder):
    """A chat bot the recipient has blocked (a 403): the address must be switched off."""

    name = "blocked"
    address_source = AddressSource.CHANNEL_ADDRESS

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(outgoing)
        raise ChannelError(
            "BLOCKED",
            "Forbidden: bot was blocked by the user",
            retryable=False,
            deactivate_address=True,
        )


class GatedChannel(Recorder):
    """Sends wait until the test opens the gate; counts how many are in flight at once."""

    name = "gated"
    gate = threading.Event()
    in_flight = 0
    most_in_flight = 0
    slow_ids: set[int] = set()

    @classmethod
    def reset(cls) -> None:
        super().reset()
        cls.gate = threading.Event()
        cls.in_flight = cls.most_in_flight = 0
        cls.slow_ids = set()

    def send(self, outgoing: Outgoing) -> SendResult:
        cls = type(self)
        with self.lock:
            cls.in_flight += 1
            cls.most_in_flight = max(cls.most_in_flight, cls.in_flight)
        try:
            if not cls.slow_ids or outgoing.delivery_id in cls.slow_ids:
                if not cls.gate.wait(timeout=30):
                    raise TimeoutError("the test never opened the gate")
            else:
                time.sleep(0.01)
            self.record(outgoing)
        finally:
            with self.lock:
                cls.in_flight -= 1
        return SendResult(provider_message_id=f"gated-{outgoing.delivery_id}")


class SlowChannel(Recorder):
    """Every send takes SECONDS; the lease check and time budgets see WORST_CASE."""

    name = "slow"
    SECONDS = 0.2
    WORST_CASE = timedelta(seconds=0.5)

    @property
    def worst_case(self) -> timedelta:
        return self.WORST_CASE

    def send(self, outgoing: Outgoing) -> SendResult:
        time.sleep(self.SECONDS)
        self.record(outgoing)
        return SendResult(provider_message_id=f"slow-{outgoing.delivery_id}")


class _ThreadRecorder(Recorder):
    """Like RecordingChannel, and remembers which thread sent each."""

    threads: list[str] = []

    @classmethod
    def reset(cls) -> None:
        super().reset()
        cls.threads = []

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(outgoing)
        with self.lock:
            type(self).threads.append(threading.current_thread().name)
        return SendResult(provider_message_id=f"{self.name}-{outgoing.delivery_id}")


class LocalChannel(_ThreadRecorder):
    """Sends that finish at once, without I/O."""

    name = "local"
    local = True


class ThreadRecordingChannel(_ThreadRecorder):
    name = "thread_recording"


class UnwatchedChannel(RecordingChannel):
    """A channel whose dead rows need nobody (Channel.needs_attention), as a showcase's are."""

    name = "unwatched"
    needs_attention = False
    choosable = False


ALL = [
    LocalChannel,
    ThreadRecordingChannel,
    RecordingChannel,
    AlwaysRetryableChannel,
    RejectingChannel,
    ExplodingChannel,
    BlockedChannel,
    GatedChannel,
    SlowChannel,
    UnwatchedChannel,
]
