"""One run at a time across processes, and a killed run found and run again, on real
PostgreSQL with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from jobs import runner
from jobs.models import JobRun, Status, Trigger
from tests.helpers import database_url
from tests.jobs import sample

BASE_DIR = Path(settings.BASE_DIR)

# A process that registers the tests' holding job and runs it once, printing its outcome.
SCRIPT = """
import json, os, signal, django
django.setup()
from jobs import registry, runner
from jobs.models import Trigger
from tests.jobs import sample
from jobs.management.commands.run_job import exit_on_sigterm
registry.add(sample.HOLD)
if os.environ.get("JOB_SIGTERM_AT_START"):
    # SIGTERM the moment the running row is in, before the run is under way.
    start = runner._start
    def _start(*args, **kwargs):
        run_id = start(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return run_id
    runner._start = _start
with exit_on_sigterm():
    print(json.dumps(runner.run(sample.HOLD, trigger=Trigger.COMMAND).as_dict()))
"""


def poll(predicate, *, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def spawn(transactional_db, tmp_path):
    """Start a process running the holding job against the test database."""
    # The embedded server listens on a socket folder, which helpers.database_url quotes.
    url = database_url()
    release = tmp_path / "release"
    started = []

    def start(*, through: str | None = None, **extra_env) -> subprocess.Popen:
        env = (
            os.environ
            | {
                "DATABASE_URL": through or url,
                "JOB_RELEASE": str(release),
                "DJANGO_SETTINGS_MODULE": "v10r.settings",
            }
            | extra_env
        )
        process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT],
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    start.release = release
    yield start
    release.touch()
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def outcome(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def runs(**filters) -> list[JobRun]:
    return list(JobRun.objects.filter(slug=sample.HOLD.slug, **filters).order_by("id"))


def test_two_processes_triggering_one_slug_at_once_run_it_once(spawn):
    check_one_of_two_runs(spawn)


def test_through_pgbouncer_in_transaction_mode_two_processes_still_run_a_slug_once(
    spawn, pgbouncer
):
    # Two server connections for two processes, each with its lease thread: nothing of the
    # one-at-a-time rule may live in a session.
    check_one_of_two_runs(spawn, through=pgbouncer.url(connection.settings_dict["NAME"]))


def check_one_of_two_runs(spawn, *, through: str | None = None) -> None:
    first, second = spawn(through=through), spawn(through=through)
    # Both started together; the job holds until released, so whichever got the slug is
    # still running when the other tries it.
    assert poll(lambda: len(runs()) == 2), "both processes recorded a run"
    assert poll(lambda: first.poll() is not None or second.poll() is not None)
    spawn.release.touch()
    statuses = sorted(outcome(process)["status"] for process in (first, second))
    assert statuses == [Status.SKIPPED, Status.SUCCEEDED]
    skipped = runs(status=Status.SKIPPED)[0]
    [succeeded] = runs(status=Status.SUCCEEDED)
    assert skipped.result == {"reason": "already running", "running_run": succeeded.pk}
    assert succeeded.result == {"held": True}
    assert succeeded.finished_at is not None and succeeded.duration is not None
    assert {run.pid for run in runs()} == {first.pid, second.pid}


def test_a_killed_run_is_found_abandoned_and_the_slug_runs_again(spawn, settings, monkeypatch):
    settings.JOBS_LEASE_SECONDS = 1
    monkeypatch.setenv("JOB_RELEASE", str(spawn.release))
    victim = spawn(JOBS_LEASE_SECONDS="1")
    assert poll(lambda: bool(runs(status=Status.RUNNING)))
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)

    def lapsed() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM jobs.runs WHERE status = 'running'"
                " AND lease_expires_at < now()"
            )
            return cursor.fetchone()[0] == 1

    assert poll(lapsed)
    spawn.release.touch()
    again = runner.run(sample.HOLD, trigger=Trigger.COMMAND)
    assert again.status == Status.SUCCEEDED
    [dead] = runs(pid=victim.pid)
    assert dead.status == Status.ABANDONED
    assert dead.finished_at is not None
    assert "stopped renewing the lease" in dead.error


def test_the_runs_table_is_one_django_flushes_between_transactional_tests(transactional_db):
    # Its schema is found from the model, as the queue's is: else a test's runs would be
    # left for the next one to find.
    assert 'jobs"."runs' in connection.introspection.django_table_names(only_existing=True)


def test_a_command_stopped_by_sigterm_writes_its_run_failed_on_the_way_out(spawn):
    process = spawn()
    assert poll(lambda: bool(runs(status=Status.RUNNING)))
    # The row is in, and the run may not yet be under way: a stop then waits until it is.
    process.send_signal(signal.SIGTERM)
    check_stopped_by_sigterm(process)


def test_a_sigterm_just_after_the_running_row_is_written_still_writes_it_failed(spawn):
    # The moment the test above can hit by chance, every time.
    check_stopped_by_sigterm(spawn(JOB_SIGTERM_AT_START="1"))


def check_stopped_by_sigterm(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "stopped by SIGTERM" in err
    [run] = runs()
    assert run.status == Status.FAILED
    assert run.error == "SystemExit: stopped by SIGTERM"
    assert run.finished_at is not None
