"""drain_outbox as operators run it: separate processes, signals, a database that restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection

from notifications.models import DrainHeartbeat, NotificationDelivery, Status
from tests.helpers import (
    channels_env,
    counts,
    database_url,
    drain_until,
    make_deliveries,
    poll,
    python,
    start_drain,
    stop,
)
from v10r import embedded_postgresql

BASE_DIR = Path(__file__).resolve().parents[2]


def test_four_processes_drain_five_thousand_deliveries_each_exactly_once(
    transactional_db, user, smtp_server
):
    ids = make_deliveries(user, 5000, channel="email")
    processes = [
        start_drain("--batch-size", "25", url=database_url(), smtp_port=smtp_server.port)
        for _ in range(4)
    ]
    try:
        done = poll(lambda: counts() == {Status.SENT: 5000}, seconds=240, every=0.5)
    finally:
        results = [stop(p) for p in processes]
    assert done, counts()
    assert [code for code, _ in results] == [0, 0, 0, 0], results
    # Every process took part, and nobody sent a row twice.
    assert all("claimed=25" in output for _, output in results)
    assert set(NotificationDelivery.objects.values_list("attempts", flat=True)) == {1}
    received = smtp_server.mailbox.message_ids()
    assert len(received) == 5000
    assert set(received.values()) == {1}
    assert {int(m.split("-")[1].split("@")[0]) for m in received} == set(ids)


def test_a_drain_process_holds_one_database_connection_while_sixteen_threads_send(
    transactional_db, user, smtp_server
):
    """docs/deploy.md counts one connection per drain process: only the draining thread
    talks to PostgreSQL. Sampled from pg_stat_activity throughout 400 emails, 16 at a time."""
    make_deliveries(user, 400, channel="email")
    seen: set[int] = set()
    most = 0

    def sample() -> bool:
        nonlocal most
        with connection.cursor() as cursor:
            # Only the drain's own: other tests' servers may be connected to this database.
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'drain-under-test'"
            )
            pids = {pid for (pid,) in cursor.fetchall()}
        seen.update(pids)
        most = max(most, len(pids))
        return counts() == {Status.SENT: 400}

    done, code, output = drain_until(
        sample,
        "--batch-size",
        "25",
        smtp_port=smtp_server.port,
        seconds=120,
        every=0.02,
        # libpq names every connection the process opens after PGAPPNAME.
        extra_env={
            "DELIVERY_CONCURRENCY": "16",
            "V10R_CHANNELS": channels_env("email"),
            "PGAPPNAME": "drain-under-test",
        },
    )
    assert done and code == 0, output
    assert len(smtp_server.mailbox.message_ids()) == 400
    assert (most, len(seen)) == (1, 1), (most, seen)


def test_sigterm_mid_batch_finishes_the_batch_and_exits_zero(transactional_db, user, smtp_server):
    smtp_server.mailbox.step_delay = 0.3  # each send takes about a second
    ids = make_deliveries(user, 8, channel="email")
    process = start_drain(
        "--batch-size", "8", "--concurrency", "4", url=database_url(), smtp_port=smtp_server.port
    )
    assert poll(lambda: counts().get(Status.PROCESSING) == 8, seconds=30)
    code, output = stop(process)
    assert code == 0, output
    assert "SIGTERM received: finishing the current batch" in output
    assert counts() == {Status.SENT: 8}
    assert len(smtp_server.mailbox.message_ids()) == len(ids)
    # The loop left its heartbeat, and marked it stopped on the way out.
    beat = DrainHeartbeat.objects.get(pid=process.pid)
    assert beat.stopped_at is not None
    assert beat.last_report["sent"] == 8


@pytest.fixture
def private_database(tmp_path):
    """A PostgreSQL server of this test's own, so it can be restarted without harming others."""
    pgdata = tmp_path / "pgdata"
    socket_dir = embedded_postgresql.ensure_running(pgdata)
    url = f"postgres://postgres@{quote(str(socket_dir), safe='')}/v10r"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_DEBUG"} | {"DATABASE_URL": url}
    migrated = python("manage.py", "migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stderr
    yield pgdata, socket_dir, url
    embedded_postgresql.stop(pgdata)


def seed(socket_dir: Path, count: int) -> None:
    with psycopg.connect(host=str(socket_dir), user="postgres", dbname="v10r") as db:
        user_id = db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, "
            "email, is_staff, is_active, date_joined) VALUES ('!', false, 'ada', '', '', "
            "'ada@example.com', false, true, now()) RETURNING id"
        ).fetchone()[0]
        db.execute(
            """
            WITH n AS (
                INSERT INTO notifications.notifications (id, user_id, type, message_key,
                                                         message_params, action_url)
                SELECT gen_random_uuid(), %s, 'test', 'test.note', '{"label": "x"}', ''
                FROM generate_series(1, %s)
                RETURNING id
            )
            INSERT INTO notifications.notification_deliveries (notification_id, channel)
            SELECT id, 'email' FROM n
            """,
            [user_id, count],
        )


def statuses(socket_dir: Path) -> dict[str, int]:
    with psycopg.connect(host=str(socket_dir), user="postgres", dbname="v10r") as db:
        rows = db.execute(
            "SELECT status, count(*) FROM notifications.notification_deliveries GROUP BY status"
        ).fetchall()
    return dict(rows)


class Output:
    """A process's output, read as it comes, so a test can wait for what it says."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._process = process
        self._reader = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def says(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def text(self) -> str:
        """What it said so far; all of it once the process has ended."""
        if self._process.poll() is not None:
            self._reader.join(timeout=30)
        return "".join(list(self.lines))


def test_a_database_restart_under_a_running_drain_loses_nothing(private_database, smtp_server):
    pgdata, socket_dir, url = private_database
    seed(socket_dir, 300)
    smtp_server.mailbox.step_delay = 0.02
    process = start_drain(
        "--batch-size",
        "10",
        "--concurrency",
        "4",
        "--lease",
        "12",
        url=url,
        smtp_port=smtp_server.port,
        email_timeout=1.0,
        # Email alone: the lease check counts every configured channel's worst case, and a
        # 12 s lease is shorter than three rounds of an HTTP channel's 11 s.
        extra_env={"V10R_CHANNELS": channels_env("email")},
    )
    output = Output(process)
    try:
        assert poll(lambda: statuses(socket_dir).get("sent", 0) >= 30, seconds=60)
        embedded_postgresql.stop(pgdata)
        # The loop meets the dead database before it comes back.
        assert poll(lambda: output.says("database unavailable"), seconds=30), output.text()
        embedded_postgresql.ensure_running(pgdata)
        assert poll(lambda: statuses(socket_dir) == {"sent": 300}, seconds=90, every=0.5), statuses(
            socket_dir
        )
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    assert code == 0, output.text()
    received = smtp_server.mailbox.message_ids()
    assert len(received) == 300
    assert set(received.values()) == {1}
