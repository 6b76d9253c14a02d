"""Jobs for the tests, registered only by the tests that use them (registered() below)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.tasks import task

from jobs import registry, runner


@task
def count(**arguments) -> dict:
    return {"counted": 3, **arguments}


@task
def hold() -> dict:
    """Wait until the file JOB_RELEASE names exists (a minute at most), then succeed."""
    release = Path(os.environ["JOB_RELEASE"])
    deadline = time.monotonic() + 60
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return {"held": True}


@task
def measure() -> dict:
    return {"seconds_left": runner.seconds_left()}


@task
def fail() -> dict:
    raise ValueError(
        f"could not reach postgres://app:hunter2@db.example/v10r with {settings.CRON_SECRET}"
    )


@task
def overrun() -> dict:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return {"finished": True}


def make(slug: str, work, *, cron: str = "*/5 * * * *", seconds: float = 30) -> registry.Job:
    return registry.Job(
        slug=slug,
        task=work,
        cron=cron,
        time_limit=timedelta(seconds=seconds),
        description="A job of the tests.",
    )


HOLD = make("test-hold", hold)


@contextmanager
def registered(*entries: registry.Job):
    for entry in entries:
        registry.add(entry)
    try:
        yield
    finally:
        for entry in entries:
            registry.remove(entry)
