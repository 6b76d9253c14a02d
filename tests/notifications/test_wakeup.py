"""The wake-up: a committed delivery wakes a resident drain_outbox at once, not at its next
poll; a lost listening connection, PgBouncer and DELIVERY_LISTEN_URL=off fall back to the poll.

Each drain here polls every 30 s unless the test is about the poll, so a row sent within a few
seconds was sent because the drain heard of it.
"""

from __future__ import annotations

import os

import psycopg
import pytest
from django.db import connection, transaction

from notifications import wakeup
from notifications.models import Status
from tests.helpers import counts, database_url, notify, poll, python, start_drain, stop
from tests.notifications.test_drain_processes import Output
from tests.v10r.test_settings import read_settings
from v10r.environment import SettingError

# Far shorter than the 30 s poll, long enough for a busy two-core machine.
PROMPTLY = 3.0


def listeners() -> list[int]:
    """The backends of this database that LISTEN for the drains' wake-ups."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND query LIKE 'LISTEN%%'",
            [wakeup.LISTENER_NAME],
        )
        return [pid for (pid,) in cursor.fetchall()]


def ticks(output: Output) -> int:
    return sum("notifications.worker: tick " in line for line in list(output.lines))


def start_listening_drain(smtp_server, *args: str, url: str | None = None, **env: str):
    """A resident drain that has ticked, is listening, and waits out its interval."""
    # Every tick in the log: the loop says only its first empty one at INFO.
    env = {"V10R_LOG_LEVEL": "DEBUG", **env}
    process = start_drain(
        *args, url=url or database_url(), smtp_port=smtp_server.port, extra_env=env
    )
    output = Output(process)
    # Its first tick, then the one it makes as soon as it listens (for rows committed before).
    ready = poll(lambda: listeners() and ticks(output) >= 2, seconds=30, every=0.05)
    if not ready:
        stop(process)
        pytest.fail(f"the drain did not start listening: {output.text()}")
    return process, output


def test_a_drain_polling_every_30_s_sends_a_committed_row_within_seconds(
    transactional_db, user, smtp_server
):
    process, output = start_listening_drain(smtp_server, "--interval", "30")
    try:
        notify(user, channels=["email"])
        sent = poll(lambda: counts() == {Status.SENT: 1}, seconds=PROMPTLY)
    finally:
        code, text = stop(process)[0], output.text()
    assert sent, text
    assert code == 0, text
    assert "wake-ups: listening on" in text
    assert len(smtp_server.mailbox.message_ids()) == 1


def test_a_burst_of_commits_wakes_each_drain_and_every_row_is_sent_once(
    transactional_db, user, smtp_server
):
    drains = [start_listening_drain(smtp_server, "--interval", "30") for _ in range(3)]
    try:
        for i in range(20):
            notify(user, channels=["email"], label=f"n{i}")
        sent = poll(lambda: counts() == {Status.SENT: 20}, seconds=PROMPTLY * 2)
    finally:
        codes = [stop(process)[0] for process, _ in drains]
    assert sent, counts()
    assert codes == [0, 0, 0], [output.text() for _, output in drains]
    assert set(smtp_server.mailbox.message_ids().values()) == {1}
    assert len(smtp_server.mailbox.message_ids()) == 20


def test_a_killed_listening_connection_falls_back_to_the_poll_and_comes_back(
    transactional_db, user, smtp_server
):
    process, output = start_listening_drain(smtp_server, "--interval", "1")
    try:
        [first] = listeners()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [first])
        assert poll(lambda: output.says("not listening for wake-ups"), seconds=10)
        # Committed while nobody listens: the poll finds it.
        notify(user, channels=["email"], label="deaf")
        assert poll(lambda: counts() == {Status.SENT: 1}, seconds=1 + PROMPTLY)
        # And the drain listens again, on a new connection.
        assert poll(lambda: listeners() and listeners() != [first], seconds=10)
    finally:
        code, text = stop(process)[0], output.text()
    assert code == 0, text
    assert text.count("not listening for wake-ups") == 1, text
    assert "listening for wake-ups again" in text


def test_the_wake_up_follows_the_commit_never_precedes_it(transactional_db, user, smtp_server):
    process, output = start_listening_drain(smtp_server, "--interval", "30")
    params = {k: v for k, v in wakeup.listen_params().items() if k != "application_name"}
    try:
        with psycopg.connect(**params) as ear:
            ear.execute(f"LISTEN {wakeup.CHANNEL}")
            asked = wakeup.waker().sent
            with transaction.atomic():
                notify(user, channels=["email"])
                heard_early = list(ear.notifies(timeout=0.5))
                assert wakeup.waker().sent == asked  # not even requested yet
            heard = list(ear.notifies(timeout=PROMPTLY, stop_after=1))
            sent = poll(lambda: counts() == {Status.SENT: 1}, seconds=PROMPTLY)
    finally:
        code, text = stop(process)[0], output.text()
    assert heard_early == []
    assert [n.channel for n in heard] == [wakeup.CHANNEL]
    assert sent, text
    assert code == 0, text


def test_with_listening_off_the_drain_polls(transactional_db, user, smtp_server):
    process = start_drain(
        "--interval",
        "1",
        url=database_url(),
        smtp_port=smtp_server.port,
        extra_env={"DELIVERY_LISTEN_URL": "off", "V10R_LOG_LEVEL": "DEBUG"},
    )
    output = Output(process)
    try:
        assert poll(lambda: ticks(output) >= 2, seconds=60)
        notify(user, channels=["email"])
        sent = poll(lambda: counts() == {Status.SENT: 1}, seconds=1 + PROMPTLY)
        listening = listeners()
    finally:
        code, text = stop(process)[0], output.text()
    assert sent, text
    assert code == 0, text
    assert listening == []
    assert "wake-ups: off (DELIVERY_LISTEN_URL=off), polling only" in text


def test_an_enqueue_through_pgbouncer_wakes_a_drain_listening_on_the_direct_url(
    pgbouncer, user, smtp_server
):
    bouncer = pgbouncer.url(connection.settings_dict["NAME"])
    process, output = start_listening_drain(
        smtp_server, "--interval", "30", url=bouncer, DELIVERY_LISTEN_URL=database_url()
    )
    # Another process enqueues through PgBouncer and exits at once, as a script would.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_DEBUG"} | {"DATABASE_URL": bouncer}
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from notifications.enqueue import send_notification\n"
        f"user = get_user_model().objects.get(pk={user.pk})\n"
        "send_notification(user=user, type='test.note',"
        " params={'label': 'x'}, channels=['email'])\n"
    )
    try:
        enqueued = python("manage.py", "shell", "-c", script, env=env)
        assert enqueued.returncode == 0, enqueued.stderr
        sent = poll(lambda: counts() == {Status.SENT: 1}, seconds=PROMPTLY)
    finally:
        code, text = stop(process)[0], output.text()
    assert sent, text
    assert code == 0, text


def test_the_waking_thread_closes_its_connection_once_idle(transactional_db, user):
    def waking_backends() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            return cursor.fetchone()[0]

    notify(user, channels=["email"])
    assert wakeup.waker().flush(timeout=10)
    assert waking_backends() == 1
    assert poll(lambda: waking_backends() == 0, seconds=wakeup.IDLE_SECONDS + 5)


def test_many_requests_during_one_notify_cost_one_more(transactional_db, user):
    waker = wakeup.waker()
    waker.flush(timeout=10)
    before = waker.sent
    for _ in range(200):
        wakeup.request_wake()
    assert waker.flush(timeout=10)
    # Not one NOTIFY each: one per turn of the thread (the first request's, then one for
    # all that came while it was in flight, a few at most on a busy machine).
    assert 1 <= waker.sent - before <= 5


@pytest.mark.parametrize(
    "value", ["mysql://u@h/db", "localhost:5432", "yes", "postgres://u@h/db?no_such_option=1"]
)
def test_a_listen_url_that_is_not_postgresql_is_refused(monkeypatch, value):
    with pytest.raises(SettingError, match="DELIVERY_LISTEN_URL is not a postgres:// URL"):
        read_settings(monkeypatch, DELIVERY_LISTEN_URL=value)


def test_the_listen_url_is_read_as_given_or_off(monkeypatch):
    direct = "postgres://v10r:secret@db.internal:5432/v10r"
    assert read_settings(monkeypatch, DELIVERY_LISTEN_URL=direct)["DELIVERY_LISTEN_URL"] == direct
    assert read_settings(monkeypatch, DELIVERY_LISTEN_URL="OFF")["DELIVERY_LISTEN_URL"] == "off"


def test_the_waking_thread_wakes_on_a_new_connection_when_the_server_dropped_its_own(
    transactional_db, monkeypatch
):
    params = {k: v for k, v in wakeup.listen_params().items() if k != "application_name"}
    # Its connection kept for the test's length, however slow the machine.
    monkeypatch.setattr(wakeup, "IDLE_SECONDS", 60)
    try:
        with psycopg.connect(**params) as ear:
            ear.execute(f"LISTEN {wakeup.CHANNEL}")
            wakeup.request_wake()
            assert wakeup.waker().flush(timeout=10)
            assert len(list(ear.notifies(timeout=PROMPTLY, stop_after=1))) == 1
            with connection.cursor() as cursor:
                ours = [connection.connection.info.backend_pid, ear.info.backend_pid]
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND backend_type = 'client backend'"
                    " AND pid <> ALL(%s)",
                    [ours],
                )
                assert cursor.rowcount == 1  # the waking thread's, kept since its NOTIFY
            wakeup.request_wake()
            assert wakeup.waker().flush(timeout=10)
            heard = list(ear.notifies(timeout=PROMPTLY, stop_after=1))
    finally:
        # Back to closing once idle: the test database is dropped at the end.
        monkeypatch.undo()
        wakeup.request_wake()
        wakeup.waker().flush(timeout=10)
    assert [n.channel for n in heard] == [wakeup.CHANNEL]


def test_the_waking_thread_outlives_a_database_it_may_not_use(caplog):
    """pytest-django blocks the database outside database tests, as a lost server would: the
    wake-up is dropped with a warning, and the thread goes on."""
    wakeup.request_wake()
    assert wakeup.waker().flush(timeout=10)
    assert "could not wake the drains" in caplog.text
    assert wakeup.waker()._thread.is_alive()


def test_the_listening_connection_finds_a_half_open_peer_by_tcp_keepalives(settings):
    settings.DELIVERY_LISTEN_URL = "postgres://postgres@127.0.0.1:5432/v10r?keepalives_idle=60"
    params = wakeup.listen_params()
    assert params["keepalives"] == 1 and params["keepalives_count"] == 3
    assert params["keepalives_idle"] == "60"  # the URL's own choice is kept
    settings.DELIVERY_LISTEN_URL = ""
    assert wakeup.listen_params()["keepalives_interval"] == 10
