"""Total deadlines for the channels' network conversations, and the one thread that keeps them.

A socket's timeout bounds each read and write; a server that answers slowly, a byte or a
line at a time, could still hold a send far longer. So every send runs under a Deadline:
when its time comes, the watchdog calls its cut (a socket shutdown), and whatever call is
blocked on that socket fails at once.

One watchdog thread serves every channel in the process, SMTP and HTTP alike. A timer
thread per send would do the same, but starting one costs about as much as the rest of a
send on a kept connection.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections.abc import Callable

THREAD_NAME = "channel-deadlines"


class Deadline:
    """A moment on time.monotonic()'s clock after which cut is called, once, unless the
    send finished first. Used as a context manager: watched from entry until exit, and once
    the exit has returned, cut is never called any more."""

    def __init__(self, *, at: float, cut: Callable[[], None]) -> None:
        self.at = at
        self.expired = False
        self.over = False  # the send finished: nothing to cut any more
        self._cut = cut

    @classmethod
    def after(cls, seconds: float, *, cut: Callable[[], None]) -> Deadline:
        return cls(at=time.monotonic() + seconds, cut=cut)

    def left(self) -> float:
        return self.at - time.monotonic()

    @property
    def passed(self) -> bool:
        """Whether the time is up: expired, or about to be. A socket timeout set to the time
        left ends at the same moment, and can beat the watchdog to it on a busy machine; a
        failure then is the deadline's all the same."""
        return self.expired or time.monotonic() >= self.at

    def check(self) -> None:
        """Raise TimeoutError when the deadline has passed: for a step that a cut socket
        would not interrupt (one that has not used the socket yet)."""
        if self.expired:
            raise TimeoutError("the deadline passed")

    def expire(self) -> None:
        self.expired = True
        self._cut()  # a shutdown() call: quick, never blocks

    def __enter__(self) -> Deadline:
        _watchdog.watch(self)
        return self

    def __exit__(self, *exc_info) -> None:
        _watchdog.release(self)


class _Watchdog:
    """The thread that expires every deadline whose time has come, started on first use."""

    def __init__(self) -> None:
        self._forget()
        # A forked child has no watchdog thread, and must never cut its parent's sockets.
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._due = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._thread: threading.Thread | None = None

    def watch(self, deadline: Deadline) -> None:
        with self._due:
            heapq.heappush(self._heap, (deadline.at, id(deadline), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
                self._thread.start()
            if self._heap[0][2] is deadline:
                self._due.notify()  # the earliest now: wake up sooner

    def release(self, deadline: Deadline) -> None:
        # Under the lock, so once this returns the watchdog cannot expire it any more.
        # Its entry stays in the heap until its time, and is dropped then.
        with self._due:
            deadline.over = True

    def _run(self) -> None:
        with self._due:
            while True:
                while self._heap and self._heap[0][2].over:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._due.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._due.wait(wait)
                    continue
                _, _, deadline = heapq.heappop(self._heap)
                deadline.expire()


_watchdog = _Watchdog()
