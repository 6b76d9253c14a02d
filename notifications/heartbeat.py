"""The drain loop's heartbeat: proof, in the database, that a worker ticked and when."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings

from core import platform
from notifications import checks
from notifications.models import DatabaseNow, DrainHeartbeat

# The one-shot drains, named by what started them: the /cron/drain endpoint, or
# `drain_outbox --once` from a shell or a scheduler that runs commands. Neither is a loop.
CRON_WORKER = "cron"
COMMAND_WORKER = "command"
ONE_SHOT_WORKERS = (CRON_WORKER, COMMAND_WORKER)
# A loop is "running" while its last tick is younger than this many intervals (one missed
# tick is tolerated), plus the longest a batch may take (stale_after): a loop beats between
# batches, never during one, and with a 2 s tick a batch of slow sends outlasts a few ticks.
STALE_AFTER_INTERVALS = 2.5


def stale_after(interval: timedelta) -> timedelta:
    """How long after its last tick a loop of this interval counts as stopped: the intervals
    above, plus the worst case of a full batch under the settings' policy."""
    batch = checks.worst_case_batch(
        batch_size=settings.DELIVERY_BATCH_SIZE, concurrency=settings.DELIVERY_CONCURRENCY
    )
    return interval * STALE_AFTER_INTERVALS + batch


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def beat(*, worker: str, interval: timedelta, report: dict) -> None:
    """Record a tick of worker, stamped with the database clock."""
    host, _, pid = worker.partition(":")
    DrainHeartbeat.objects.update_or_create(
        worker=worker,
        defaults={
            "host": host,
            "pid": int(pid) if pid.isdigit() else None,
            "interval_seconds": interval.total_seconds(),
            "ticked_at": DatabaseNow(),
            "stopped_at": None,
            "last_report": report,
        },
        create_defaults={
            "host": host,
            "pid": int(pid) if pid.isdigit() else None,
            "interval_seconds": interval.total_seconds(),
            "started_at": DatabaseNow(),
            "ticked_at": DatabaseNow(),
            "last_report": report,
        },
    )


def stop(*, worker: str) -> None:
    """Record that worker exited cleanly."""
    DrainHeartbeat.objects.filter(worker=worker).update(stopped_at=DatabaseNow())


class LoopState(StrEnum):
    RUNNING = "running"  # a loop ticked within stale_after() of its interval
    STOPPED = "stopped"  # a persistent host, and no loop ticking: deliveries wait
    DORMANT = "dormant"  # a serverless host: no loop by design, a cron drains


@dataclass(frozen=True)
class LoopStatus:
    """What the page and the admin say about the drain loop: running, stopped or dormant."""

    state: LoopState
    platform: platform.Platform
    last_tick: datetime | None = None
    host: str = ""
    interval: timedelta | None = None
    last_cron: datetime | None = None


def status() -> LoopStatus:
    """Say whether a drain loop has ticked recently; on serverless hosts, that it sleeps."""
    here = platform.current()
    rows = DrainHeartbeat.objects.annotate(db_now=DatabaseNow()).order_by("-ticked_at")
    cron = rows.filter(worker=CRON_WORKER).first()
    loop = rows.exclude(worker__in=ONE_SHOT_WORKERS).first()
    last_cron = cron.ticked_at if cron else None
    if loop is not None:
        interval = timedelta(seconds=loop.interval_seconds)
        fresh = loop.db_now - loop.ticked_at <= stale_after(interval)
        if loop.stopped_at is None and fresh:
            return LoopStatus(
                LoopState.RUNNING, here, loop.ticked_at, loop.host, interval, last_cron=last_cron
            )
    state = LoopState.STOPPED if here.persistent else LoopState.DORMANT
    return LoopStatus(
        state,
        here,
        loop.ticked_at if loop else None,
        loop.host if loop else "",
        timedelta(seconds=loop.interval_seconds) if loop else None,
        last_cron=last_cron,
    )
