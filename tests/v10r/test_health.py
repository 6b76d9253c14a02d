"""The probes: /healthz answers without the database, /readyz answers for it, both in JSON,
200 or 503, and never a 500 — not even when PostgreSQL is gone."""

from __future__ import annotations

import json
import os
import socket
import textwrap
import time

import psycopg
import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from tests.helpers import database_url, python
from tests.smtp import free_port
from v10r import health

# Asks the probes in a fresh process, as a supervisor would, on the database it is given.
ASK = textwrap.dedent(
    """
    import json, time
    import django
    django.setup()
    from django.test import Client
    client = Client()
    for path in ("/healthz", "/readyz"):
        started = time.monotonic()
        response = client.get(path)
        print(json.dumps({"path": path, "status": response.status_code,
                          "body": response.json(), "seconds": time.monotonic() - started}))
    """
)


def ask_in_a_process(database_url: str) -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_DEBUG", "PG"))}
    env |= {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "v10r.settings"}
    result = python("-c", ASK, env=env, seconds=60)
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    return {answer["path"]: answer for answer in answers}


@pytest.fixture
def unknown_migration_state(monkeypatch):
    """A process that has not yet seen every migration applied."""
    monkeypatch.setattr(health, "_migrated", False)


def test_healthz_answers_ok_without_touching_the_database(client):
    # No db fixture: pytest-django fails any query this test makes.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_readyz_answers_ok_when_the_database_answers_and_every_migration_is_applied(
    client, unknown_migration_state
):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_get_and_head_and_refuse_other_methods(client, path):
    assert client.head(path).status_code == 200
    response = client.post(path)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_any_host_over_plain_http_while_pages_still_check_both(
    client, settings, path
):
    # What a kubelet or a load balancer sends: the instance's address, no TLS.
    settings.ALLOWED_HOSTS = ["v10r.example"]
    settings.SECURE_SSL_REDIRECT = True
    assert client.get(path, HTTP_HOST="10.0.0.7:8000").status_code == 200
    assert client.get("/", HTTP_HOST="10.0.0.7:8000").status_code == 400
    assert client.get("/", HTTP_HOST="v10r.example").status_code == 301


@pytest.mark.django_db
def test_probes_live_outside_the_language_prefixes(client):
    assert client.get("/ru/healthz").status_code == 404
    assert client.get("/de/readyz").status_code == 404


@pytest.mark.django_db
def test_readyz_answers_503_naming_a_migration_that_is_not_applied(client, unknown_migration_state):
    # Inside the test's transaction: as if `migrate` had not run the latest migration.
    latest = MigrationRecorder.Migration.objects.filter(app="notifications").latest("id")
    latest.delete()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "reason": f"unapplied migrations: notifications.{latest.name}",
    }
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_readyz_checks_migrations_until_all_are_applied_and_then_only_the_database(
    client, unknown_migration_state
):
    assert client.get("/readyz").status_code == 200
    # A running process never un-applies a migration of its own code: no need to look again.
    MigrationRecorder.Migration.objects.filter(app="notifications").latest("id").delete()
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_readyz_names_the_first_unapplied_migrations_and_counts_the_rest(
    client, unknown_migration_state
):
    MigrationRecorder.Migration.objects.filter(app__in=["auth", "notifications"]).delete()
    reason = client.get("/readyz").json()["reason"]
    assert reason.startswith("unapplied migrations: ")
    assert reason.count(", ") == health.NAMED - 1
    assert reason.endswith(" more")


@pytest.mark.django_db
def test_readyz_answers_503_when_the_database_does_not_answer_within_its_timeout(
    client, unknown_migration_state
):
    # Another session holds the lock a long migration would: the readiness query waits on
    # it, and the statement timeout ends the wait.
    with psycopg.connect(database_url(), autocommit=True) as other:
        other.execute("BEGIN")
        other.execute("LOCK TABLE django_migrations IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        response = client.get("/readyz")
        seconds = time.monotonic() - started
        other.execute("ROLLBACK")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "reason": "database unavailable (QueryCanceled)",
    }
    timeout = health.READY_TIMEOUT.total_seconds()
    assert timeout <= seconds < 2 * timeout


def test_readyz_answers_503_when_nothing_listens_on_the_database_port():
    answers = ask_in_a_process(f"postgres://postgres@127.0.0.1:{free_port()}/v10r")
    assert answers["/healthz"]["status"] == 200
    assert answers["/readyz"]["status"] == 503
    assert answers["/readyz"]["body"] == {
        "status": "unavailable",
        "reason": "database unavailable (OperationalError)",
    }


def test_readyz_answers_503_within_seconds_when_the_database_never_replies():
    # A port that accepts connections (the kernel completes the handshake) and says nothing.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        answers = ask_in_a_process(f"postgres://postgres@127.0.0.1:{silent.getsockname()[1]}/v10r")
    assert answers["/readyz"]["status"] == 503
    assert answers["/readyz"]["body"]["reason"].startswith("database unavailable")
    # The settings' connect_timeout (5 s), not psycopg's 130 s default.
    assert answers["/readyz"]["seconds"] < 8


def test_readyz_works_through_pgbouncer_and_leaves_no_setting_on_its_server_connections(
    pgbouncer,
):
    url = pgbouncer.url(connection.settings_dict["NAME"])
    assert ask_in_a_process(url)["/readyz"]["status"] == 200
    # Two transactions at once hold both of PgBouncer's server connections: neither may keep
    # the check's statement timeout (a plain SET would stay on whichever it ran on).
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        timeouts = [c.execute("SHOW statement_timeout").fetchone()[0] for c in (first, second)]
    assert timeouts == ["0", "0"]
