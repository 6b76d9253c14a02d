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
# The least time between two NOTIFYs of one process. A commit when none went out for this long
# is announced at once; one within it, when it ends, together with every other commit of those
# milliseconds. A single send is woken as fast as ever; a loop of sends pays one NOTIFY for
# several (each costs the process and a backend a fifth of a send's CPU), and the lock at
# commit that every notifying transaction of the cluster queues behind is taken at most this
# often by each process. The drain woken by the NOTIFY before keeps claiming while its batches
# come back full, so a burst's rows are rarely left to wait for the next one.
SPACING_SECONDS = 0.005
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
# Reconnecting a lost listening connection: a second after the loss, then ever later. A deaf
# one (below) is dropped and tried again on the same schedule.
RECONNECT_SECONDS = (1.0, 2.0, 5.0, 15.0, 60.0)
# After its LISTEN, the listening connection sends itself a test notification the way an
# enqueue does (through the site's own connection, DATABASE_URL) and expects to hear it within
# this long. Through PgBouncer in transaction pooling the LISTEN "succeeds" on whichever server
# connection ran it, and nothing sent later reaches this client: it is deaf.
PROBE_SECONDS = 5.0
# The test notification's payload starts with this; a wake-up's is empty.
PROBE_PREFIX = "probe:"


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
            if connected:
                time.sleep(SPACING_SECONDS)

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


def _notify(payload: str = "") -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


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


def describe(params: dict) -> str:
    """Where a listening connection goes, in words for the log: host, port and database, and
    which setting named it."""
    host = params.get("host") or "localhost"
    where = (
        f"the Unix socket in {host}"
        if host.startswith("/")
        else f"{host}:{params.get('port') or 5432}"
    )
    if settings.DELIVERY_LISTEN_URL:
        route = "DELIVERY_LISTEN_URL"
    else:
        # The one URL every query of the site uses: if a transaction pooler serves it, LISTEN
        # hears nothing there (the test notification below says so).
        route = "DATABASE_URL's own connection, the one the site's queries use"
    return f"{where}, database {params.get('dbname', '')} ({route})"


class Listener:
    """The drain loop's ear: wait() returns early when a drain was asked to wake. It holds
    one idle connection; a lost one is logged once and reconnected with a growing pause,
    and the loop polls meanwhile. Each new connection proves it hears: it sends itself a
    test notification, and one that does not hear it within PROBE_SECONDS is deaf (logged
    once, dropped and tried again later, like a lost one)."""

    def __init__(self, params: dict | None) -> None:
        self._params = params
        self._conn: psycopg.Connection | None = None
        self._failures = 0
        self._retry_at = 0.0
        # The test notification this connection waits for, and until when.
        self._probe: str | None = None
        self._probe_until = 0.0
        self._probe_sent_at = 0.0
        self._deaf_said = False
        # For /metrics, read and reset by the loop: wake-ups heard, and test notifications that
        # never came back.
        self.wakeups = 0
        self.unheard_probes = 0

    @classmethod
    def from_settings(cls) -> Listener:
        params = listen_params()
        if params is None:
            logger.info("wake-ups: off (DELIVERY_LISTEN_URL=off), polling only")
        else:
            logger.info("wake-ups: listening on %s, channel %s", describe(params), CHANNEL)
        return cls(params)

    @property
    def proven(self) -> bool:
        """Whether the connection has heard its own test notification."""
        return self._conn is not None and self._probe is None

    def wait(self, seconds: float, stopping: threading.Event) -> bool:
        """Block for up to seconds, until a wake-up or stopping; True when woken. Every
        wake-up that arrived meanwhile is consumed, so a burst of commits wakes once."""
        deadline = time.monotonic() + seconds
        # Rows may have been committed while nobody listened: once listening, look at once.
        if self._due_to_connect() and self._connect():
            return True
        while not stopping.is_set():
            now = time.monotonic()
            if self._probe is not None and now >= self._probe_until:
                self._deaf()
            left = deadline - now
            if left <= 0:
                return False
            step = min(left, STOP_SLICE_SECONDS)
            if self._conn is None:
                if stopping.wait(step):
                    break
                continue
            try:
                woken = False
                for notice in self._conn.notifies(timeout=step, stop_after=1):
                    woken = self._heard(notice.payload) or woken
                if woken:
                    # The rest of the burst, already queued: one tick serves it all.
                    for notice in self._conn.notifies(timeout=0):
                        self._heard(notice.payload)
                    self.wakeups += 1
                    return True
            except psycopg.Error as exc:
                self._lost(exc)
        return False

    def _heard(self, payload: str) -> bool:
        """Take one notification; whether it is a wake-up (not a test notification)."""
        if not payload.startswith(PROBE_PREFIX):
            if self._probe is not None:
                # Any wake-up that arrives proves the connection hears as well as the test.
                self._proven(after=None)
            return True
        if payload == self._probe:
            self._proven(after=time.monotonic() - self._probe_sent_at)
        return False

    def _proven(self, *, after: float | None) -> None:
        self._probe = None
        self._failures = 0
        if after is not None:
            logger.info("wake-ups: heard (the test notification came back in %.0f ms)", after * 1e3)
        if self._deaf_said:
            logger.info("wake-ups: the listening connection hears again")
            self._deaf_said = False

    def _deaf(self) -> None:
        self._probe = None
        self.unheard_probes += 1
        if not self._deaf_said:
            self._deaf_said = True
            logger.warning(
                "wake-ups: DEAF. The listening connection (%s) did not hear its own test "
                "notification within %g s, so it would never hear an enqueue's either: every "
                "delivery waits for the next poll (DELIVERY_INTERVAL_SECONDS). A transaction "
                "pooler such as PgBouncer in front of it does this; set DELIVERY_LISTEN_URL to "
                "a postgres:// URL straight to the server. Trying again later.",
                describe(self._params),
                PROBE_SECONDS,
            )
        # Dropped and tried again on the reconnect schedule, without a second warning.
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                logger.debug("closing the deaf connection failed", exc_info=True)
        self._back_off()

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
        if self._failures and not self._deaf_said:
            logger.info("listening for wake-ups again")
        self._conn = conn
        self._send_probe()
        if not self._deaf_said:
            self._failures = 0
        return True

    def _send_probe(self) -> None:
        """Send the test notification the way an enqueue's wake-up goes (the site's own
        connection), for this connection to hear."""
        token = f"{PROBE_PREFIX}{os.getpid()}:{time.monotonic_ns()}"
        try:
            _notify(token)
        except Exception as exc:
            # The database the loop drains from is unreachable: its tick says so; the next
            # connection tries again.
            logger.debug("could not send the test notification: %s", exc)
            return
        self._probe = token
        self._probe_sent_at = time.monotonic()
        self._probe_until = self._probe_sent_at + PROBE_SECONDS

    def _lost(self, exc: Exception) -> None:
        self.close()
        self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self._failures == 0:
            logger.warning(
                "not listening for wake-ups (%s); polling until the connection is back",
                str(exc).strip() or type(exc).__name__,
            )
        self._back_off()

    def _back_off(self) -> None:
        pause = RECONNECT_SECONDS[min(self._failures, len(RECONNECT_SECONDS) - 1)]
        self._failures += 1
        self._retry_at = time.monotonic() + pause

    def close(self) -> None:
        self._probe = None
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                logger.debug("closing the listening connection failed", exc_info=True)
