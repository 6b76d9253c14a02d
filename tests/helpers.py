"""Helpers the tests share: rows, the database's clock, drain processes, waiting with a
deadline, and requiring a program that is installed on CI machines."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from django.apps import apps
from django.db import connection

from jobs.models import JobRun, Status, Trigger
from notifications import enqueue, outbox
from notifications.models import Notification, NotificationDelivery
from transports.base import Outgoing

BASE_DIR = Path(__file__).resolve().parents[1]


def python(*args: str, env: dict[str, str], seconds: float = 180) -> subprocess.CompletedProcess:
    """Run this interpreter in the project folder (`manage.py …`, `-m …`) with exactly env,
    as an operator's shell would; its output is captured as text."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=seconds,
    )


def require(program: str, *, install: str) -> str:
    """Return program's path; skip the test without it, or fail it under CI (CI=true), where a
    skipped test would hide a missing install step."""
    path = shutil.which(program) or (
        f"/usr/sbin/{program}" if os.path.exists(f"/usr/sbin/{program}") else None
    )
    if path is None:
        reason = f"{program} is not installed ({install})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; under CI a skipped test is a failure.")
        pytest.skip(reason)
    return path


def make_deliveries(user, count: int, *, channel: str = "recording") -> list[int]:
    """Insert count due deliveries (one notification each) in two statements; return ids."""
    notifications = Notification.objects.bulk_create(
        [
            Notification(
                user=user,
                type="test.note",
                message_key="test.note",
                message_params={"label": f"n{i}"},
            )
            for i in range(count)
        ]
    )
    deliveries = NotificationDelivery.objects.bulk_create(
        [NotificationDelivery(notification=n, channel=channel) for n in notifications]
    )
    return [d.id for d in deliveries]


def make_run(*, slug: str = "test-count", trigger=Trigger.SCHEDULER, status, **fields) -> JobRun:
    """A run in the jobs' log, started at the start of 2026 with a minute to run on host "h",
    but for the fields given."""
    defaults = {
        "started_at": "2026-01-01T00:00:00Z",
        "deadline_at": "2026-01-01T00:01:00Z",
        "host": "h",
        "pid": 1,
    }
    return JobRun.objects.create(
        slug=slug, trigger=trigger, status=status, **{**defaults, **fields}
    )


def make_timed_run() -> JobRun:
    """A housekeeping run in the jobs' log with a duration and a fractional number in its
    result (1.25 s each): what a page's numbers are checked against."""
    return make_run(
        slug="housekeeping",
        trigger=Trigger.COMMAND,
        status=Status.SUCCEEDED,
        finished_at="2026-01-01T00:00:01.25Z",
        duration=timedelta(seconds=1.25),
        deadline_at="2026-01-01T00:02:00Z",
        result={"seconds": 1.25},
    )


def post_from(client, url: str, *, visitor: str) -> int:
    """The status of htmx's post to url by visitor, through the one trusted proxy (on
    loopback) that names them in X-Forwarded-For."""
    return client.post(
        url, HTTP_HX_REQUEST="true", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=visitor
    ).status_code


def make_outgoing(**fields) -> Outgoing:
    """A message for a channel to send: delivery 7, in English, "Welcome" and "Hello" with a
    link, but for the fields given (a channel's test gives at least channel and address)."""
    defaults = {
        "delivery_id": 7,
        "subject": "Welcome",
        "body": "Hello",
        "action_url": "https://v10r.example/n/7",
        "language": "en",
    }
    return Outgoing(**{**defaults, **fields})


def notify(user, *, channels=None, label: str = "x") -> Notification:
    """Queue a notification that renders anywhere (the demo's message) for user on channels;
    with none named, the user's addresses choose."""
    return enqueue.send_notification(
        user=user, type="test.note", params={"label": label}, channels=channels
    ).notification


def channels_env(*names: str) -> str:
    """V10R_CHANNELS for a process a test starts: names, and the showcase's channel when the
    showcase is installed, whose check (showcases.E001) refuses a site without it."""
    return ",".join([*names, *(["demo"] if apps.is_installed("showcases") else [])])


def welcome_by_email(user, name: str) -> enqueue.Enqueued:
    """The welcome message (category account) for user, by email alone."""
    return enqueue.send_notification(
        user=user, type="welcome", params={"name": name}, channels=["email"]
    )


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def execute(sql: str, params=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _slot_seconds(key: str, *, since: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT extract(epoch FROM next_slot_at - {since})"
            " FROM notifications.provider_rates WHERE key = %s",
            [key],
        )
        return float(cursor.fetchone()[0])


def next_slot(key: str) -> float:
    """The pacing key's next slot, as seconds since the epoch."""
    return _slot_seconds(key, since="'epoch'::timestamptz")


def database_clock() -> float:
    """The database's clock as it reads now (clock_timestamp(), not the transaction's start),
    as seconds since the epoch: the clock the pacing keys' slots are on."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
        return float(cursor.fetchone()[0])


def update_delivery(delivery_id: int, assignments: str) -> None:
    """Set fields of one delivery in SQL (assignments: "attempts = 4, …"), behind the
    outbox's back: a row's past, or a state no code path leaves it in."""
    execute(
        f"UPDATE notifications.notification_deliveries SET {assignments} WHERE id = %s",
        [delivery_id],
    )


def database_url() -> str:
    """A DATABASE_URL for the test database, for subprocesses (drain_outbox, benchmarks)."""
    params = connection.get_connection_params()
    host = params.get("host") or "localhost"
    netloc = quote(host, safe="") if host.startswith("/") else host
    if params.get("port"):
        netloc += f":{params['port']}"
    credentials = quote(params.get("user") or "postgres", safe="")
    if params.get("password"):
        credentials += ":" + quote(params["password"], safe="")
    return f"postgres://{credentials}@{netloc}/{quote(params['dbname'], safe='')}"


def backend_pid() -> int:
    """This thread's connection's server process, as pg_locks names it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def waits_for_a_lock(pid: int) -> bool:
    """Whether the server process pid waits for a lock another transaction holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_locks WHERE pid = %s AND NOT granted)", [pid])
        return cursor.fetchone()[0]


def poll(predicate, *, seconds: float = 10.0, every: float = 0.02):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


def start_drain(
    *args: str,
    url: str,
    smtp_port: int,
    email_timeout: float = 5.0,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "EMAIL_"))}
    env |= {
        "DATABASE_URL": url,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_port),
        "EMAIL_TIMEOUT": str(email_timeout),
        "DELIVERY_INTERVAL_SECONDS": "0.2",
        **(extra_env or {}),
    }
    env.pop("DJANGO_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "manage.py", "drain_outbox", *args],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def drain_until(
    predicate,
    *args: str,
    smtp_port: int,
    seconds: float,
    every: float,
    extra_env: dict[str, str] | None = None,
) -> tuple[bool, int, str]:
    """Run one drain_outbox (args, as "--batch-size", "25") on the test database until
    predicate holds or seconds pass, then stop it; return whether predicate held, and the
    process's exit code and output."""
    drain = start_drain(*args, url=database_url(), smtp_port=smtp_port, extra_env=extra_env)
    try:
        done = poll(predicate, seconds=seconds, every=every)
    finally:
        code, output = stop(drain)
    return done, code, output


def stop(process: subprocess.Popen, *, seconds: float = 30) -> tuple[int, str]:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=seconds)
    return process.returncode, output


def counts() -> dict[str, int]:
    rows = NotificationDelivery.objects.values_list("status", flat=True)
    result: dict[str, int] = {}
    for status in rows:
        result[status] = result.get(status, 0) + 1
    return result


def finish(delivery_ids, *, status: str) -> None:
    """Drive rows to dead or failed through the outbox, as a drain would."""
    execute(
        "UPDATE notifications.notification_deliveries SET attempts = 4 WHERE id = ANY(%s)",
        [delivery_ids],
    )
    for claimed in outbox.claim(batch_size=len(delivery_ids)):
        mark_failed(
            claimed,
            code="UPSTREAM_503" if status == "dead" else "BAD_ADDRESS",
            message="x",
            retryable=status == "dead",
        )


def mark_sent(delivery: outbox.ClaimedDelivery, *, provider_message_id: str) -> bool:
    """Write one claimed row's success, as a drain's flush would; whether it landed."""
    outcome = outbox.Outcome.sent(delivery, provider_message_id=provider_message_id)
    return bool(outbox.write_outcomes([outcome]))


def mark_failed(delivery: outbox.ClaimedDelivery, **failure) -> bool:
    """Write one claimed row's failure (Outcome.failure's arguments); whether it landed."""
    return bool(outbox.write_outcomes([outbox.Outcome.failure(delivery, **failure)]))


def in_thread(call):
    """Run call on a thread of its own (with its own database connection, closed when it
    ends); return the thread and the dict its result lands in, under "value"."""
    result = {}

    def run() -> None:
        try:
            result["value"] = call()
        finally:
            connection.close()  # this thread's own

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result
