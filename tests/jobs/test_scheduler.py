"""The interval trigger without cron: the Procfile's scheduler (run_jobs --every) sweeps,
records its runs as the scheduler's, and stops cleanly on SIGTERM; run_jobs --due sweeps
once; run_job runs one job by hand."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs.models import JobRun, Status, Trigger
from tests.helpers import BASE_DIR, database_url, poll
from tests.jobs import sample


def scheduler_command() -> list[str]:
    for line in (BASE_DIR / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name == "scheduler":
            return shlex.split(command.replace("python", sys.executable, 1))
    raise AssertionError("the Procfile has no scheduler line")


def test_the_procfile_scheduler_sweeps_and_exits_0_on_sigterm(transactional_db):
    env = os.environ | {"DATABASE_URL": database_url()}
    process = subprocess.Popen(
        scheduler_command(),
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    try:
        finished = lambda: JobRun.objects.filter(  # noqa: E731 - a fresh query each poll
            trigger=Trigger.SCHEDULER, status=Status.SUCCEEDED
        ).values_list("slug", flat=True)
        # The site's own jobs have never run in this database: the first sweep runs both.
        assert poll(lambda: set(finished()) == {"housekeeping", "prune-outbox"}, seconds=120), (
            "".join(lines)
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        reader.join(timeout=10)
    output = "".join(lines)
    assert process.returncode == 0, output
    assert (
        "Sweeping the jobs every 60 s until SIGTERM or Ctrl-C; either lets the sweep under way"
        " finish, then exits."
    ) in output.splitlines(), output
    assert output.rstrip().endswith("Stopped.")


def test_run_jobs_due_runs_what_is_due_once_and_prints_each_run(db, only, capsys):
    only(sample.make("test-count", sample.count))
    call_command("run_jobs", "--due")
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["status"] == "succeeded"
    call_command("run_jobs", "--due")
    assert capsys.readouterr().out == ""
    assert JobRun.objects.get().trigger == Trigger.SCHEDULER


def test_run_job_runs_one_job_by_hand_and_fails_the_command_when_the_job_fails(db, only):
    only(sample.make("test-count", sample.count), sample.make("test-fail", sample.fail))
    call_command("run_job", "test-count")
    assert JobRun.objects.get(slug="test-count").trigger == Trigger.COMMAND
    with pytest.raises(CommandError, match="test-fail failed: ValueError: could not reach"):
        call_command("run_job", "test-fail")


def test_run_job_refuses_an_unknown_slug_naming_the_known_ones(db, only):
    only(sample.make("test-count", sample.count))
    with pytest.raises(CommandError, match=r"No job is registered as 'nope' \(known: test-count\)"):
        call_command("run_job", "nope")


def test_run_jobs_list_says_each_cadence_in_words(only, capsys):
    only(sample.make("test-count", sample.count, cron="*/5 * * * *"))
    call_command("run_jobs", "--list")
    assert capsys.readouterr().out.split("\t")[:3] == [
        "test-count",
        "*/5 * * * *",
        "Every 5 minutes",
    ]
