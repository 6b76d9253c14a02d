"""The site's own scheduled work, as jobs."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from core import pruning
from jobs import runner
from jobs.registry import job
from notifications import retention, worker

# Retention stops itself this long before its time limit, between two batches, and the
# next run carries on from its cursors: stopping by itself beats being stopped.
MARGIN = timedelta(seconds=5)


@job(
    slug="prune-outbox",
    cron="17 * * * *",
    time_limit=timedelta(minutes=15),
    description=_("Deletes old finished deliveries, and job runs past their keep."),
)
def prune_outbox(**changes) -> dict:
    seconds = max(1.0, runner.seconds_left() - MARGIN.total_seconds())
    seconds = min(seconds, changes.pop("max_seconds", None) or seconds)
    policy = retention.RetentionPolicy.from_settings(max_seconds=seconds, **changes)
    pruned = retention.prune(policy)
    if pruned.taken_over:
        raise RuntimeError("this prune fell silent and another took over")
    if pruned.skipped:
        # The drain loop's idle slice, or `manage.py prune_outbox`, is pruning right now: the
        # work is being done, from the same cursors, so this run has nothing to add. Said in
        # its result, not raised: it is no failure for anyone to look into.
        started = f"{pruned.other_started_at:%Y-%m-%d %H:%M:%S}"
        report = {"pruned_by_another": f"another prune is running (started at {started})"}
    else:
        report = pruned.as_dict()
    report["job_runs"] = pruning.repeat(
        "job runs", lambda: runner.prune(older_than=timedelta(days=settings.JOBS_KEEP_RUNS_DAYS))
    )
    return report


@job(
    slug="housekeeping",
    cron="*/5 * * * *",
    time_limit=timedelta(minutes=2),
    description=_(
        "Tidies up after the site: a slice of outbox pruning, retired metric rows, expired "
        "rate-limit windows and sessions, finished demo rows."
    ),
)
def housekeeping() -> dict:
    return worker.tidy().as_dict()
