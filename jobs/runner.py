"""One runner for every trigger: start a run (or record why not), run it within its time
limit under a lease, and write how it ended.

One run of a slug at a time, on every host: a run is a row inserted as `running`, and the
partial unique index runs_one_running refuses a second such row for the slug, so the second
trigger records a `skipped` row and returns at once. The running row carries a lease that a
thread of the running process renews; a row whose lease lapsed belongs to a process that
died, and the next trigger of any slug marks it `abandoned` (or `timed_out`, past its
deadline) so the slug can run again. Nothing is held in a session or a transaction across
the run, so PgBouncer's transaction mode stays supported.

A run over its time limit: in a main thread (the commands, the scheduler's sweep) SIGALRM
interrupts it and it is `timed_out`; elsewhere (a web request's thread) it cannot be stopped
from outside, so its lease stops being renewed at the deadline, another trigger marks it
`timed_out`, and when it ends it is written `timed_out` too.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import signal
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection

from jobs import cadence, registry
from jobs.models import SLOT_RELEASED, Status, Trigger
from jobs.registry import Job

logger = logging.getLogger("jobs")

START_SQL = """
INSERT INTO jobs.runs (slug, trigger, status, slot_at, started_at, deadline_at,
                       lease_expires_at, result, error, host, pid)
VALUES (%(slug)s, %(trigger)s, 'running', %(slot)s, now(),
        now() + make_interval(secs => %(limit)s), now() + make_interval(secs => %(lease)s),
        '{}', '', %(host)s, %(pid)s)
ON CONFLICT DO NOTHING
RETURNING id
""".strip()

RECORD_SKIPPED_SQL = """
INSERT INTO jobs.runs (slug, trigger, status, slot_at, started_at, finished_at, duration,
                       deadline_at, result, error, host, pid)
VALUES (%(slug)s, %(trigger)s, 'skipped', %(slot)s, now(), now(), interval '0', now(),
        %(result)s::jsonb, '', %(host)s, %(pid)s)
RETURNING id
""".strip()

FIND_RUNNING_SQL = "SELECT id FROM jobs.runs WHERE slug = %(slug)s AND status = 'running'"

# Running rows whose process stopped renewing the lease: dead, or past its deadline.
REAP_SQL = """
UPDATE jobs.runs
SET status = CASE WHEN deadline_at < now() THEN 'timed_out' ELSE 'abandoned' END,
    finished_at = now(), duration = now() - started_at, lease_expires_at = NULL,
    error = CASE WHEN deadline_at < now()
                 THEN 'Ran past its time limit; its lease lapsed.'
                 ELSE 'Its process stopped renewing the lease: it died or was killed.' END
WHERE status = 'running' AND lease_expires_at < now()
  AND (%(slug)s::text IS NULL OR slug = %(slug)s)
RETURNING slug, status
""".strip()

RENEW_SQL = """
UPDATE jobs.runs SET lease_expires_at = now() + make_interval(secs => %(lease)s)
WHERE id = %(id)s AND status = 'running'
""".strip()

FINISH_SQL = """
UPDATE jobs.runs
SET status = %(status)s, finished_at = now(), duration = now() - started_at,
    lease_expires_at = NULL, result = %(result)s::jsonb, error = %(error)s
WHERE id = %(id)s AND status = 'running'
RETURNING id
""".strip()

# Due: no run since the slot came that counts for it, and none running now. A run counts
# whatever its trigger (one asked for by hand after the slot does the slot's work), unless
# it was skipped or its process died.
SLOT_DUE_SQL = """
SELECT NOT EXISTS (
    SELECT FROM jobs.runs
    WHERE slug = %(slug)s
      AND (status = 'running' OR (started_at >= %(slot)s AND status <> ALL(%(released)s)))
)
""".strip()

PRUNE_RUNS_SQL = """
DELETE FROM jobs.runs
WHERE id IN (
    SELECT id FROM jobs.runs
    WHERE started_at < now() - make_interval(secs => %(older)s) AND status <> 'running'
    ORDER BY started_at
    LIMIT %(limit)s
)
""".strip()

# Lease renewals happen this many times a lease, so one late renewal does not lose it.
RENEWALS_PER_LEASE = 3
ERROR_LENGTH = 500


class TimeLimitExceeded(BaseException):
    """Raised inside a run at its deadline. A BaseException, so the job's own `except
    Exception` does not swallow it."""


@dataclass
class Outcome:
    """How one trigger of a slug ended."""

    slug: str
    status: str
    run_id: int | None = None
    result: dict = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {
            "slug": self.slug,
            "run": self.run_id,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "result": self.result,
            "error": self.error,
        }


_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "job_deadline", default=None
)


def seconds_left() -> float:
    """Inside a run: how long it has until its time limit (inf outside any run)."""
    deadline = _deadline.get()
    return float("inf") if deadline is None else deadline - time.monotonic()


def run(
    job: Job,
    *,
    trigger: Trigger,
    slot_at: datetime | None = None,
    time_limit: timedelta | None = None,
    arguments: dict | None = None,
) -> Outcome:
    """Run job now, unless a run of its slug is under way (then record a skipped run)."""
    limit = (time_limit or job.time_limit).total_seconds()
    # From the insert of the running row until the try below can write how the run ended, a
    # stop (SIGTERM, Ctrl-C) waits: raised in between, it would leave the row running until
    # its lease lapsed.
    with _HeldStops() as stops:
        run_id = _start(job, trigger=trigger, slot_at=slot_at, limit=limit)
        if isinstance(run_id, Outcome):
            return run_id
        began = time.monotonic()
        deadline = began + limit
        lease = Lease(run_id, deadline=deadline)
        lease.start()
        token = _deadline.set(deadline)
        status, result, error = Status.SUCCEEDED, {}, ""
        try:
            try:
                stops.deliver()  # a stop that came while the run started is raised here
                with _alarm(limit):
                    result = _as_json(job.task.call(**(arguments or {})))
            finally:
                _deadline.reset(token)
                lease.stop()
        except TimeLimitExceeded:
            status, error = Status.TIMED_OUT, f"Stopped at its time limit of {limit:g} s."
            # Interrupted anywhere, a query included: start the next statement on a fresh link
            # (inside a caller's transaction, the link is the caller's to roll back).
            if not connection.in_atomic_block:
                connection.close()
        except Exception as exc:  # noqa: BLE001 - a job's failure is written down, not raised
            status, error = Status.FAILED, describe(exc)
            logger.exception("job %s failed", job.slug)
        except BaseException as exc:
            # Ctrl-C or SystemExit mid-run: write it down, then let it stop the process.
            with _HeldStops():
                _finish(
                    job, run_id, status=Status.FAILED, result={}, error=describe(exc), began=began
                )
            raise
    if status == Status.SUCCEEDED and time.monotonic() > deadline:
        status, error = Status.TIMED_OUT, f"Ran past its time limit of {limit:g} s."
    # A stop while the outcome is written comes once it is written.
    with _HeldStops():
        return _finish(job, run_id, status=status, result=result, error=error, began=began)


def sweep(*, trigger: Trigger, budget: timedelta | None = None) -> list[Outcome]:
    """Run every job whose cadence came due since its last run, once, in slug order.

    Only the latest slot counts: a job missed for a day while the host was down runs once.
    With a budget, a job starts only with time left, and gets no more than what is left.
    """
    reap()
    began = time.monotonic()
    outcomes = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        (now,) = cursor.fetchone()
    for job in registry.jobs():
        left = None
        if budget is not None:
            left = budget.total_seconds() - (time.monotonic() - began)
            if left < 1:
                break
        if problem := cadence.problem(job.cadence):
            # manage.py check refuses it, but a web server starts without the checks: one
            # bad cadence must not stop the other jobs.
            logger.error("job %s is not swept: %s", job.slug, problem)
            continue
        slot = cadence.previous(job.cadence, now=now)
        if not due(job, slot_at=slot):
            continue
        limit = job.time_limit if left is None else min(job.time_limit, timedelta(seconds=left))
        outcomes.append(run(job, trigger=trigger, slot_at=slot, time_limit=limit))
    return outcomes


def due(job: Job, *, slot_at: datetime) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            SLOT_DUE_SQL, {"slug": job.slug, "slot": slot_at, "released": list(SLOT_RELEASED)}
        )
        return cursor.fetchone()[0]


def reap(slug: str | None = None) -> list[tuple[str, str]]:
    """Mark running rows whose lease lapsed (of slug, or of every slug); return them."""
    with connection.cursor() as cursor:
        cursor.execute(REAP_SQL, {"slug": slug})
        reaped = cursor.fetchall()
    for dead_slug, status in reaped:
        logger.warning("job %s: a run was found %s", dead_slug, status)
    return reaped


def prune(*, older_than: timedelta, limit: int = 1000) -> int:
    """Delete at most limit finished runs started more than older_than ago."""
    with connection.cursor() as cursor:
        cursor.execute(PRUNE_RUNS_SQL, {"older": older_than.total_seconds(), "limit": limit})
        return cursor.rowcount


def _start(job: Job, *, trigger: Trigger, slot_at, limit: float) -> int | Outcome:
    params = {
        "slug": job.slug,
        "trigger": str(trigger),
        "slot": slot_at,
        "limit": limit,
        "lease": settings.JOBS_LEASE_SECONDS,
        "host": socket.gethostname()[:200],
        "pid": os.getpid(),
    }
    with connection.cursor() as cursor:
        for attempt in range(2):
            cursor.execute(START_SQL, params)
            row = cursor.fetchone()
            if row is not None:
                return row[0]
            # A run holds the slug (or took the slot): if its lease lapsed, it is dead; mark
            # it and try once more.
            if attempt == 0 and not reap(job.slug):
                break
        cursor.execute(FIND_RUNNING_SQL, {"slug": job.slug})
        running = cursor.fetchone()
        result = (
            {"reason": "already running", "running_run": running[0]}
            if running
            else {"reason": "already ran for this slot"}
        )
        cursor.execute(RECORD_SKIPPED_SQL, params | {"result": json.dumps(result)})
        (skipped_id,) = cursor.fetchone()
    return Outcome(slug=job.slug, status=Status.SKIPPED, run_id=skipped_id, result=result)


def _finish(job: Job, run_id: int, *, status, result: dict, error: str, began: float) -> Outcome:
    params = {"id": run_id, "status": str(status), "result": json.dumps(result), "error": error}
    try:
        row = _write_finish(params)
    except DatabaseError:
        # The job may have left the connection broken (a lost link, an aborted transaction):
        # write how it ended on a fresh one.
        connection.close()
        row = _write_finish(params)
    seconds = time.monotonic() - began
    if row is None:
        # Another trigger found the lease lapsed and marked the run (a run past its limit
        # in a thread that could not be stopped): that status stands.
        with connection.cursor() as cursor:
            cursor.execute("SELECT status, error FROM jobs.runs WHERE id = %s", [run_id])
            found = cursor.fetchone()
        status, error = (found[0], found[1]) if found else (Status.ABANDONED, error)
    return Outcome(
        slug=job.slug,
        status=str(status),
        run_id=run_id,
        result=result,
        error=error,
        seconds=seconds,
    )


def _write_finish(params: dict):
    with connection.cursor() as cursor:
        cursor.execute(FINISH_SQL, params)
        return cursor.fetchone()


class Lease(threading.Thread):
    """Renews a run's lease while it lives, on a connection of its own, until its deadline."""

    def __init__(self, run_id: int, *, deadline: float) -> None:
        super().__init__(name=f"job-lease-{run_id}", daemon=True)
        self.run_id = run_id
        self.deadline = deadline
        self._stopped = threading.Event()

    def run(self) -> None:
        every = settings.JOBS_LEASE_SECONDS / RENEWALS_PER_LEASE
        try:
            while not self._stopped.wait(every):
                if time.monotonic() > self.deadline:
                    return  # past the limit: let the lease lapse, so others see it
                try:
                    with connection.cursor() as cursor:
                        cursor.execute(
                            RENEW_SQL, {"id": self.run_id, "lease": settings.JOBS_LEASE_SECONDS}
                        )
                except DatabaseError:
                    logger.exception("job run %s: renewing its lease failed", self.run_id)
                    connection.close()
        finally:
            connection.close()

    def stop(self) -> None:
        self._stopped.set()
        self.join()


class _HeldStops:
    """SIGTERM and SIGINT noted instead of handled, until deliver() (or the end of the
    `with`) puts the previous handlers back and raises the signals that came meanwhile."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.came: list[int] = []
        self.previous: dict[int, object] = {}

    def __enter__(self) -> _HeldStops:
        # Signals are the main thread's: elsewhere there is nothing to hold.
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self.previous[signum] = signal.signal(signum, self._note)
        return self

    def _note(self, signum, frame) -> None:
        self.came.append(signum)

    def deliver(self) -> None:
        """Put the previous handlers back, then raise each signal that came, through them."""
        previous, self.previous = self.previous, {}
        for signum, handler in previous.items():
            # None: a handler not set from Python, which Python cannot put back; the default.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        came, self.came = list(dict.fromkeys(self.came)), []
        for signum in came:
            signal.raise_signal(signum)

    def __exit__(self, *exc_info) -> None:
        self.deliver()


@contextmanager
def _alarm(seconds: float):
    """Raise TimeLimitExceeded in this thread after seconds, where a signal can do it."""
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise TimeLimitExceeded

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# user:password@ in a URL, and the site's own secrets, never reach the log.
_CREDENTIALS = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@")


def describe(error: BaseException) -> str:
    """The error's type and message, with secrets taken out, in at most ERROR_LENGTH."""
    text = f"{type(error).__qualname__}: {error}"
    text = _CREDENTIALS.sub("***@", text)
    for name in ("SECRET_KEY", "CRON_SECRET", "METRICS_TOKEN"):
        secret = getattr(settings, name, "")
        if secret:
            text = text.replace(secret, "***")
    password = settings.DATABASES.get("default", {}).get("PASSWORD")
    if password:
        text = text.replace(password, "***")
    return text[:ERROR_LENGTH]


def _as_json(value) -> dict:
    """A job's return value as the run's small JSON result."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        value = {"value": value}
    return json.loads(json.dumps(value, default=str))
