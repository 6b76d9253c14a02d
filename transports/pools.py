"""The connections each sender thread keeps open from one send to the next.

A channel's connections are kept per sender thread, so a busy queue pays the connect (and
the TLS handshake, and an SMTP login) once per thread rather than once per message, and no
two threads ever share a connection. The worker closes those idle for a while on each quiet
turn, and all of them when it stops; a set a sender is using is never closed under it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass


@dataclass
class _Held[T]:
    item: T
    key: Hashable  # what the item was made for: another key means another item
    last_used: float
    busy: bool = False


class Pool[T]:
    """One item per sender thread (a mail backend, a thread's HTTP connections), made by
    make on the thread's first checkout and closed by close."""

    def __init__(self, *, make: Callable[[], T], close: Callable[[T], None]) -> None:
        self._make = make
        self._close = close
        self._forget()
        # The connections are the parent's: a forked child starts without any (forgetting
        # them never closes the parent's). A weak reference, so that the hook does not keep
        # every pool ever made alive.
        this = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (pool := this()) and pool._forget())

    def _forget(self) -> None:
        self._held: dict[int, _Held[T]] = {}  # by sender thread
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def checkout(self, *, key: Hashable = None) -> Iterator[T]:
        """This thread's item, marked in use until the block ends. One made for another key
        (the settings changed under us: a test, a reload) is closed and replaced."""
        thread = threading.get_ident()
        stale = None
        with self._lock:
            held = self._held.get(thread)
            if held is not None and held.key != key:
                stale, held = self._held.pop(thread), None
            if held is None:
                held = self._held[thread] = _Held(self._make(), key, time.monotonic())
            held.busy = True
        if stale is not None:
            self._close(stale.item)
        try:
            yield held.item
        finally:
            with self._lock:
                held.busy = False
                held.last_used = time.monotonic()

    def close_idle(self, *, seconds: float) -> None:
        """Close the items no sender has used for seconds."""
        self._close_where(lambda held: time.monotonic() - held.last_used >= seconds)

    def close(self) -> None:
        """Close every item not in use: the worker is stopping."""
        self._close_where(lambda held: True)

    def _close_where(self, test: Callable[[_Held[T]], bool]) -> None:
        with self._lock:
            closing = [t for t, held in self._held.items() if not held.busy and test(held)]
            items = [self._held.pop(t).item for t in closing]
        for item in items:
            self._close(item)

    def items(self) -> list[T]:
        """Every thread's item, in use or not: for counting what is open."""
        with self._lock:
            return [held.item for held in self._held.values()]


class Keeper:
    """What the worker asks of whatever keeps its senders' connections in a Pool (its _pool):
    to close those unused for idle_seconds on a quiet turn, and all of them when it stops."""

    _pool: Pool
    idle_seconds: float

    def close_idle(self) -> None:
        """Close the connections no sender has used for idle_seconds."""
        self._pool.close_idle(seconds=self.idle_seconds)

    def close(self) -> None:
        """Close every connection not in use: the worker is stopping."""
        self._pool.close()
