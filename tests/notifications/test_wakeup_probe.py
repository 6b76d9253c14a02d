"""The wake-up proves it hears: the listening connection sends itself a test notification the
way an enqueue's goes, and one that never hears it (a transaction pooler in between) says so
once, is dropped and tried again on the reconnect schedule; /metrics counts wake-ups heard and
polls that found work; `check --deploy` warns of a pooled DATABASE_URL with nowhere else to
listen. Real PostgreSQL, real PgBouncer."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.core.checks.registry import registry
from django.db import connection, connections
from psycopg.conninfo import conninfo_to_dict

from notifications import checks, wakeup
from notifications.enqueue import send_notification
from notifications.models import Status
from notifications.worker import Worker
from tests.helpers import counts, database_url, poll
from tests.notifications.test_metrics import TOKEN, sample, scrape

# A test notification comes back in milliseconds; a deaf connection is found this soon.
PROBE = 0.5


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []


@pytest.fixture
def quick_probe(monkeypatch):
    monkeypatch.setattr(wakeup, "PROBE_SECONDS", PROBE)


def listen_until(listener: wakeup.Listener, predicate, *, seconds: float = 10.0) -> bool:
    stopping = threading.Event()
    return poll(lambda: listener.wait(0.1, stopping) is not None and predicate(), seconds=seconds)


def deaf_messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "DEAF" in r.getMessage()]


def test_a_listener_straight_to_the_server_hears_its_test_notification(
    transactional_db, caplog, quick_probe
):
    caplog.set_level(logging.INFO, logger="notifications.wakeup")
    listener = wakeup.Listener(wakeup.listen_params())
    try:
        assert listen_until(listener, lambda: listener.proven)
    finally:
        listener.close()
    assert any("wake-ups: heard (the test notification came back" in m for m in caplog.messages)
    assert deaf_messages(caplog) == []
    assert listener.unheard_probes == 0


def test_a_listener_that_cannot_hear_warns_once_and_backs_off_as_documented(
    transactional_db, caplog, quick_probe
):
    # A NOTIFY is heard only in the database it was sent in: listening in another one is as
    # deaf as listening through a transaction pooler.
    params = wakeup.listen_params() | {"dbname": "postgres"}
    listener = wakeup.Listener(params)
    try:
        # Deaf at once, then again after the first pause of the schedule (1 s).
        assert listen_until(listener, lambda: listener.unheard_probes == 2, seconds=15)
    finally:
        listener.close()
    [message] = deaf_messages(caplog)
    assert "DELIVERY_LISTEN_URL" in message and "database postgres" in message
    assert listener._failures == 2  # the next try waits RECONNECT_SECONDS[2]


def test_a_listener_through_pgbouncer_is_found_deaf(pgbouncer, caplog, quick_probe):
    url = pgbouncer.url(connection.settings_dict["NAME"])
    listener = wakeup.Listener(conninfo_to_dict(url) | {"autocommit": True})
    try:
        assert listen_until(listener, lambda: listener.unheard_probes == 1)
    finally:
        listener.close()
    assert len(deaf_messages(caplog)) == 1


def test_the_start_up_line_names_host_port_database_and_the_setting(settings, caplog):
    caplog.set_level(logging.INFO, logger="notifications.wakeup")
    settings.DELIVERY_LISTEN_URL = "postgres://u@db.internal:5433/v10r"
    wakeup.Listener.from_settings()
    settings.DELIVERY_LISTEN_URL = ""
    wakeup.Listener.from_settings()
    said = [m for m in caplog.messages if m.startswith("wake-ups: listening on")]
    assert said[0].startswith("wake-ups: listening on db.internal:5433, database v10r")
    assert "(DELIVERY_LISTEN_URL)" in said[0]
    assert "(DATABASE_URL's own connection, the one the site's queries use)" in said[1]


def run_loop(worker: Worker, stopping: threading.Event) -> threading.Thread:
    def target():
        try:
            worker.run(stopping=stopping)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


@pytest.mark.parametrize(("listening", "heard", "polled"), [(True, 1, 0), (False, 0, 1)])
def test_metrics_count_wake_ups_heard_and_polls_that_found_work(
    transactional_db, client, metrics_on, settings, user, listening, heard, polled
):
    # Polling every 3 s: a row a hearing loop gets within that was woken for; a deaf one
    # (listening off, as a pooler would leave it) finds it on a poll.
    settings.DELIVERY_LISTEN_URL = "" if listening else "off"
    worker = Worker(name="probe-loop", interval=timedelta(seconds=3))
    stopping = threading.Event()
    thread = run_loop(worker, stopping)
    try:
        # Its first tick, and (listening) the connection made, before the row comes.
        assert poll(lambda: worker._last_beat > 0, seconds=10)
        if listening:
            assert poll(lambda: bool(wakeup_listeners()), seconds=10)
        send_notification(
            user=user, type="test.note", params={"label": "x"}, channels=["recording"]
        )
        assert poll(lambda: counts() == {Status.SENT: 1}, seconds=10)
    finally:
        stopping.set()
        thread.join(10)
        worker.close()
    families = scrape(client)
    assert sample(families, "v10r_outbox_wakeups_heard_total") == heard
    assert sample(families, "v10r_outbox_polls_found_work_total") == polled


def wakeup_listeners() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s",
            [wakeup.LISTENER_NAME],
        )
        return [pid for (pid,) in cursor.fetchall()]


def test_check_deploy_warns_of_a_database_url_through_pgbouncer(pgbouncer, settings):
    settings.DATABASE_URL = pgbouncer.url(connection.settings_dict["NAME"])
    settings.DELIVERY_LISTEN_URL = ""
    pooled = {**connection.settings_dict, "HOST": "127.0.0.1", "PORT": pgbouncer.port}
    original = connections["default"].settings_dict
    connection.close()
    connections["default"].settings_dict = pooled
    try:
        [warning] = checks.check_listener_route()
    finally:
        connection.close()
        connections["default"].settings_dict = original
    assert warning.id == "notifications.W020"
    assert f"names port {pgbouncer.port}" in warning.msg
    settings.DELIVERY_LISTEN_URL = database_url()
    assert checks.check_listener_route() == []


def test_check_deploy_is_quiet_straight_to_the_server(transactional_db, settings):
    settings.DATABASE_URL = database_url()
    settings.DELIVERY_LISTEN_URL = ""
    assert checks.check_listener_route() == []


def test_the_listener_check_runs_with_check_deploy_only():
    assert checks.check_listener_route in registry.get_checks(include_deployment_checks=True)
    assert checks.check_listener_route not in registry.get_checks()
