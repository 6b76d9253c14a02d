"""Waking the drains when a delivery is committed, instead of letting it wait for a poll.

The enqueuing side asks for a wake-up after its transaction commits (request_wake, from
transaction.on_commit): never inside it, because NOTIFY takes a lock at commit that every
notifying transaction in the cluster queues behind. The request only sets a flag; one thread
per process sends the NOTIFY on a connection of its own, once per burst of requests.

The drain loop listens (Listener) on a connection that keeps its session: the default
database's own settings, or DELIVERY_LISTEN_URL when DATABASE_URL goes through PgBouncer in
transaction pooling, where LISTEN hears nothing. A lost wake-up, either side, costs one poll
interval, never a row: the loop still ticks every DELIVERY_INTERVAL_SECONDS.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time

import psycopg
from django.conf import settings
from django.db import connection
from psycopg.conninfo import conninfo_to_dict

logger = logging.getLogger(__name__)

# The PostgreSQL notification channel the drains LISTEN on.
CHANNEL = "v10r_outbox"
# How long the waking thread keeps its connection after the last wake-up. A web process
# that enqueues now and then should not hold a database connection for it, and a test
# database is dropped a moment after its last test (PostgreSQL waits 5 s for its sessions).
IDLE_SECONDS = 2.0
# How long a process that exits waits for its last wake-up to go out.
EXIT_FLUSH_SECONDS = 2.0
# How long one wait of the drain loop blocks at most before it looks at its stop flag again:
# a SIGTERM's handler only sets the flag, and select() is resumed after a signal (PEP 475).
STOP_SLICE_SECONDS = 0.2
# The listening connection's name in pg_stat_activity.
LISTENER_NAME = "v10r-drain-listener"
# libpq's keepalive settings for the listening connection: probe after 30 s of silence, every
# 10 s, and give up after 3 unanswered probes.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
# Reconnecting a lost listening connection: a second after the loss, then ever later.
RECONNECT_SECONDS = (1.0, 2.0, 5.0, 15.0, 60.0)


# --- Publishing ------------------------------------------------------------------------------


class _Waker:
    """One per process: a daemon thread that sends a NOTIFY each time it finds the flag set.
    Requests made while a NOTIFY is in flight set the flag again, so they cost one more
    NOTIFY in all, sent after every one of their commits."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.wanted = threading.Event()
        self.sent = 0  # NOTIFYs sent, for tests and benchmarks
        # Requests counted, and how many of them a NOTIFY (or a failure) has dealt with: what
        # flush() waits for.
        self._progress = threading.Condition()
        self._asked = self._answered = 0
        self._thread = threading.Thread(target=self._run, name="v10r-wake", daemon=True)
        self._thread.start()

    def request(self) -> None:
        with self._progress:
            self._asked += 1
        self.wanted.set()

    def flush(self, timeout: float) -> bool:
        """Wait until every request made so far has had its NOTIFY; False on timeout."""
        with self._progress:
            return self._progress.wait_for(lambda: self._answered >= self._asked, timeout)

    def _run(self) -> None:
        connected = False
        while True:
            if not self.wanted.wait(IDLE_SECONDS if connected else None):
                _close_quietly()
                connected = False
                continue
            # Cleared before the NOTIFY: a commit that asks from now on gets one of its own.
            self.wanted.clear()
            with self._progress:
                asked = self._asked
            connected = self._send(reused=connected)
            with self._progress:
                self._answered = asked
                self._progress.notify_all()

    def _send(self, *, reused: bool) -> bool:
        """Send one NOTIFY; whether the connection is open after it. A kept connection the
        server has dropped since is retried once on a new one."""
        for retry_left in (True, False) if reused else (False,):
            try:
                _notify()
            except Exception as exc:
                # A database error, or pytest-django's RuntimeError once a test is over: the
                # drains find the rows on their next poll.
                _close_quietly()
                if not retry_left:
                    logger.warning("could not wake the drains (%s); they will poll", exc)
            else:
                self.sent += 1
                return True
        return False


def _notify() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])


def _close_quietly() -> None:
    try:
        connection.close()
    except Exception:
        logger.debug("closing the waking connection failed", exc_info=True)


_waker: _Waker | None = None
_starting = threading.Lock()


def _forget_after_fork() -> None:
    # The parent's thread does not exist in the child, and the lock may have been held.
    global _waker, _starting
    _waker = None
    _starting = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def waker() -> _Waker:
    """This process's waking thread, started on first use (and again in a forked child)."""
    global _waker
    current = _waker
    if current is None or current.pid != os.getpid():
        with _starting:
            current = _waker
            if current is None or current.pid != os.getpid():
                current = _waker = _Waker()
    return current


def request_wake() -> None:
    """Tell listening drains that deliveries were committed: call it after the commit. It
    costs the caller a flag; the NOTIFY goes out on the waking thread's connection."""
    waker().request()


@atexit.register
def _flush_at_exit() -> None:
    # A command or script that enqueues and exits at once: its wake-up still goes out (the
    # thread is a daemon, which the interpreter would stop mid-way).
    current = _waker
    if current is not None and current.pid == os.getpid():
        current.flush(timeout=EXIT_FLUSH_SECONDS)


# --- Listening -------------------------------------------------------------------------------


def listen_params() -> dict | None:
    """psycopg.connect()'s keywords for the listening connection, or None to poll only."""
    target = settings.DELIVERY_LISTEN_URL
    if target == "off":
        return None
    if target:
        params = conninfo_to_dict(target)
        params.setdefault("connect_timeout", 5)
    else:
        # The default database as Django reaches it (the test database under tests, the
        # embedded server's socket): NOTIFY is heard only in the database it was sent in.
        params = {
            key: value
            for key, value in connection.get_connection_params().items()
            if key not in {"context", "cursor_factory", "prepare_threshold"}
        }
    # An idle connection that a failover or a dropped route left half-open would hear nothing
    # for ever: TCP keepalives find it dead within about a minute, and the loop reconnects.
    # (Ignored on a Unix socket, the embedded server's.)
    for key, value in KEEPALIVES.items():
        params.setdefault(key, value)
    return params | {"application_name": LISTENER_NAME, "autocommit": True}


class Listener:
    """The drain loop's ear: wait() returns early when a drain was asked to wake. It holds
    one idle connection; a lost one is logged once and reconnected with a growing pause,
    and the loop polls meanwhile."""

    def __init__(self, params: dict | None) -> None:
        self._params = params
        self._conn: psycopg.Connection | None = None
        self._failures = 0
        self._retry_at = 0.0

    @classmethod
    def from_settings(cls) -> Listener:
        params = listen_params()
        if params is None:
            logger.info("wake-ups: off (DELIVERY_LISTEN_URL=off), polling only")
        else:
            where = f"{params.get('host') or 'localhost'}/{params.get('dbname', '')}"
            logger.info("wake-ups: listening on %s, channel %s", where, CHANNEL)
        return cls(params)

    def wait(self, seconds: float, stopping: threading.Event) -> bool:
        """Block for up to seconds, until a wake-up or stopping; True when woken. Every
        wake-up that arrived meanwhile is consumed, so a burst of commits wakes once."""
        deadline = time.monotonic() + seconds
        # Rows may have been committed while nobody listened: once listening, look at once.
        if self._due_to_connect() and self._connect():
            return True
        while not stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            step = min(left, STOP_SLICE_SECONDS)
            if self._conn is None:
                if stopping.wait(step):
                    break
                continue
            try:
                heard = any(True for _ in self._conn.notifies(timeout=step, stop_after=1))
                if heard:
                    # The rest of the burst, already queued: one tick serves it all.
                    for _ in self._conn.notifies(timeout=0):
                        pass
                    return True
            except psycopg.Error as exc:
                self._lost(exc)
        return False

    def _due_to_connect(self) -> bool:
        return (
            self._params is not None and self._conn is None and time.monotonic() >= self._retry_at
        )

    def _connect(self) -> bool:
        conn = None
        try:
            conn = psycopg.connect(**self._params)
            conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error as exc:
            if conn is not None:
                conn.close()
            self._failed(exc)
            return False
        if self._failures:
            logger.info("listening for wake-ups again")
        self._conn, self._failures = conn, 0
        return True

    def _lost(self, exc: Exception) -> None:
        self.close()
        self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self._failures == 0:
            logger.warning(
                "not listening for wake-ups (%s); polling until the connection is back",
                str(exc).strip() or type(exc).__name__,
            )
        pause = RECONNECT_SECONDS[min(self._failures, len(RECONNECT_SECONDS) - 1)]
        self._failures += 1
        self._retry_at = time.monotonic() + pause

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                logger.debug("closing the listening connection failed", exc_info=True)
