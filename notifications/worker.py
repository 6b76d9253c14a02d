"""The queue worker of one process: the drain loop, and everything it keeps between drains.

`manage.py drain_outbox` builds a Worker from its options and runs its loop, or ticks it once
(`--once`, heartbeats as the command's); `/cron/drain` ticks the process's worker once, within
a time budget, heartbeats as the cron's.
A Worker owns what must outlive one batch: the guard that stops a process from stacking a
second drain on top of a running one, the outcomes a drain could not write because the
database was gone, the sender threads, and when it last wrote a heartbeat and reaped.

The reaper is the only periodic duty a worker keeps, because it belongs to the claim's
rhythm: a lapsed lease is found by the next drain. Pruning the outbox, folding metric rows
and the other apps' tidying up are jobs (jobs/tasks.py), run one at a time under the jobs
runner's lease: one home, and no second schedule or guard for them here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import ClassVar

from django.db import DatabaseError, close_old_connections, connection

import transports as channels
from notifications import backoff, drain, heartbeat, metrics, wakeup
from notifications.drain import Policy, Report
from notifications.outbox import Outcome

logger = logging.getLogger(__name__)

# While full batches follow each other, one heartbeat a second is proof enough that the loop
# runs: the hot path need not write one per batch.
BEAT_AT_MOST_EVERY = timedelta(seconds=1)
# While the database is gone, the loop tries again after 1 s, then twice as long each time,
# up to a minute, and never longer than its interval: a database that comes back is noticed
# no later than a tick would have noticed new rows.
RECONNECT_FIRST = timedelta(seconds=1)
RECONNECT_FACTOR = 2
RECONNECT_LONGEST = timedelta(minutes=1)


def reconnect_pause(*, failures: int, interval: timedelta) -> timedelta:
    """Return how long a loop waits after its failures-th database error in a row."""
    return backoff.geometric(
        attempt=failures,
        first=RECONNECT_FIRST,
        factor=RECONNECT_FACTOR,
        longest=min(interval, RECONNECT_LONGEST),
    )


class Worker:
    """A drain loop's state and behaviour. Thread-safe for drains: a second drain started
    while one runs in this process is skipped, not stacked (the claim, not this, keeps
    processes apart)."""

    _process: ClassVar[Worker | None] = None
    _process_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, *, name: str, interval: timedelta, policy: Policy | None = None) -> None:
        self.name = name
        self.interval = interval
        self._policy = policy
        self._in_flight = threading.Lock()
        self._unwritten: list[Outcome] = []
        self._pools: dict[int, ThreadPoolExecutor] = {}
        self._last_beat = self._last_reap = float("-inf")
        # Counts and timings for /metrics, added to the database with each heartbeat.
        self._tally = metrics.Tally()
        # Whether the loop's log has said that a tick found nothing (said once, not each tick).
        self._resting_said = False

    @property
    def policy(self) -> Policy:
        """The policy given, or else the settings' (read afresh, so changed settings apply)."""
        return self._policy or Policy.from_settings()

    @classmethod
    def for_process(cls) -> Worker:
        """The worker of a process without a loop of its own (web, cron): the settings'
        policy, heartbeats as the cron's."""
        with cls._process_lock:
            if cls._process is None:
                cls._process = cls(name=heartbeat.CRON_WORKER, interval=timedelta(0))
            return cls._process

    # --- Draining ---------------------------------------------------------------------------

    def drain_once(self, *, budget: timedelta | None = None, **changes) -> Report:
        """Drain one batch (policy changes such as batch_size=… for this one); skipped when
        another drain runs in this process. With a budget, no send starts that could
        outlast it."""
        if not self._in_flight.acquire(blocking=False):
            return Report(skipped=True)
        try:
            policy = self.policy.with_changes(**changes)
            now = time.monotonic()
            deadline = now + budget.total_seconds() if budget is not None else None
            # The reaper runs at most once an interval: a row whose lease ran out is requeued
            # within lease + interval (+ the batch under way), the bound an idle loop gives
            # anyway, and back-to-back full batches do not pay a statement each for it. A
            # worker without a loop (interval 0) reaps every time.
            reap = now - self._last_reap >= self.interval.total_seconds()
            report = drain.drain(
                policy=policy,
                pool=self._pool(policy.concurrency),
                unwritten=self._unwritten,
                deadline=deadline,
                reap=reap,
            )
            if reap:
                self._last_reap = now
            return report
        finally:
            self._in_flight.release()

    def drain_within(self, *, budget: timedelta) -> Report:
        """Drain batch after batch while rows are due and budget is left; return the total.

        Claiming stops once not even the quickest channel's worst-case send would fit, or once
        a batch had to hand rows back: what is left of the budget is then too short to use."""
        deadline = time.monotonic() + budget.total_seconds()
        quickest = min((c.worst_case for c in channels.configured().values()), default=timedelta())
        total = Report()
        while (left := deadline - time.monotonic()) >= quickest.total_seconds():
            report = self.drain_once(budget=timedelta(seconds=left))
            if report.skipped:
                return total if total.claimed else report
            total.add(report)
            if not report.more_due or report.released:
                break
        return total

    def _pool(self, concurrency: int) -> ThreadPoolExecutor:
        if concurrency not in self._pools:
            self._pools[concurrency] = ThreadPoolExecutor(
                max_workers=concurrency, thread_name_prefix=f"{self.name}-send"
            )
        return self._pools[concurrency]

    # --- One turn, and the loop ---------------------------------------------------------------

    def tick(self, *, budget: timedelta | None = None) -> Report:
        """Drain (within budget, if given), then record a heartbeat; return what the drain
        did."""
        report = self.drain_within(budget=budget) if budget is not None else self.drain_once()
        if report.skipped:
            return report
        now = time.monotonic()
        resting = not report.more_due
        self._tally.count_report(report)
        beating = resting or now - self._last_beat >= BEAT_AT_MOST_EVERY.total_seconds()
        # A worker without a loop (the cron's) may not come back: it flushes every tick.
        if beating or not self.interval:
            self._tally.flush(worker=self.name)
        if beating:
            heartbeat.beat(worker=self.name, interval=self.interval, report=report.as_dict())
            self._last_beat = now
        if self.interval:
            if resting:
                _each_channel("close_idle")
        else:
            # No loop of ours comes back soon (the cron's next request may be minutes away):
            # leave no connection open on the mail server between requests.
            _each_channel("close")
        return report

    def run(self, *, stopping: threading.Event, once: bool = False) -> None:
        """Tick every interval, at once while batches come back full or when an enqueue's
        commit wakes the loop (wakeup.Listener), until stopping is set (the current batch is
        always finished). A lost database is retried with a growing pause; once=True ticks a
        single time and lets a DatabaseError through."""
        listener = None if once else wakeup.Listener.from_settings()
        try:
            self._loop(stopping=stopping, once=once, listener=listener)
        finally:
            if listener is not None:
                listener.close()
        if not once:
            with contextlib.suppress(DatabaseError):
                self._tally.flush(worker=self.name)
                heartbeat.stop(worker=self.name)

    def _loop(
        self, *, stopping: threading.Event, once: bool, listener: wakeup.Listener | None
    ) -> None:
        failures = 0
        hurried = False
        # Whether this tick comes of the interval running out (a poll), not of a wake-up or a
        # full batch: a poll that finds work found what a wake-up should have announced.
        polled = True
        while True:
            # Django's check that the connection is still good costs a statement; right after
            # a batch that used it, it is not worth one.
            if not hurried:
                close_old_connections()
            hurried = False
            began = time.monotonic()
            try:
                report = self.tick()
            except DatabaseError as exc:
                if once:
                    raise
                failures += 1
                pause = reconnect_pause(failures=failures, interval=self.interval).total_seconds()
                logger.warning("database unavailable (%s); retrying in %gs", exc, pause)
                with contextlib.suppress(Exception):
                    connection.close()
                if stopping.wait(pause):
                    break
                continue
            failures = 0
            if polled and report.claimed:
                self._tally.add("polls_found_work", "")
            polled = False
            # A resting queue ticks every 2 s: the first tick that finds nothing says so at
            # INFO, the ones after it until something happens only at DEBUG.
            busy = bool(report.claimed or report.reaped or report.skipped)
            level = logging.DEBUG if not busy and self._resting_said else logging.INFO
            logger.log(level, "tick %s", report.line())
            self._resting_said = not busy
            if once or stopping.is_set():
                break
            if report.more_due:
                hurried = True
                continue  # a lane came back full: more may be due, so do not wait
            # The next tick (an interval after this one began, so a row found by polling
            # waits at most the interval, not the interval and a tick), a wake-up (several
            # pending are one) or stop, whichever is first. Every drain woken makes one
            # claim; SKIP LOCKED shares the rows out among them.
            left = began + self.interval.total_seconds() - time.monotonic()
            polled = not listener.wait(max(left, 0.0), stopping)
            if listener.wakeups or listener.unheard_probes:
                self._tally.add("wakeups_heard", "", listener.wakeups)
                self._tally.add("wakeup_probes_unheard", "", listener.unheard_probes)
                listener.wakeups = listener.unheard_probes = 0
            if stopping.is_set():
                break

    def close(self) -> None:
        """Let the sender threads go, and close the connections they kept (a loop that ends,
        a test that is done)."""
        for pool in self._pools.values():
            pool.shutdown(wait=True)
        self._pools.clear()
        _each_channel("close")


def _each_channel(method: str) -> None:
    for channel in channels.configured().values():
        try:
            getattr(channel, method)()
        except Exception:
            # Closing a connection is a courtesy to the server; it never stops the loop.
            logger.exception("channel %s: %s() failed", channel.name, method)


def drain_once(**changes) -> Report:
    """Drain one batch on this process's worker: for tests, the shell and scripts."""
    return Worker.for_process().drain_once(**changes)
