"""The site's own scheduled work, as jobs.

These are the site's only periodic duties besides the drain's reaper (which belongs to the
claim's rhythm, notifications/worker.py). Each runs only here, so the jobs runner's
one-run-at-a-time lease is what keeps two runs of a duty apart: the outbox is pruned only by
prune-outbox (`manage.py prune_outbox` runs that same job), and housekeeping never prunes
it, so the two cannot prune at once. Retention's own run row stays for the one case the lease
cannot cover, a run the runner gave up on that is still pruning (prune_outbox below).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from core import pruning
from jobs import runner
from jobs.registry import job
from notifications import metrics, retention
from notifications.signals import outbox_idle

# The logger core/pruning.py reports each kind's failure to.
logger = logging.getLogger("housekeeping")

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
        # Every prune is a run of this job, one at a time, so the prune retention found under
        # way is one the runner has given up on: its process died (retention takes it for
        # dead once silent for STALE_RUN, and the next run carries on), or it ran past its
        # time limit in a thread nothing could stop. Either is worth a failed run to look at.
        started = f"{pruned.other_started_at:%Y-%m-%d %H:%M:%S}"
        silent = retention.STALE_RUN.total_seconds() / 60
        raise RuntimeError(
            f"the outbox was not pruned: a prune started at {started} has not ended, and no "
            "run of this job is under way (its process died, or it ran past its time limit); "
            f"it is taken for dead once it has written nothing for {silent:g} minutes"
        )
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
        "Tidies up after the site: retired metric rows, expired rate-limit windows and "
        "sessions, unconfirmed sign-ups, finished demo rows."
    ),
)
def housekeeping() -> dict:
    """Fold the metric rows of drain processes gone for an hour, then send outbox_idle so that
    every other app deletes what it left behind; return the counts by kind."""
    # One statement folds every retired row; repeat() is here for its guard, so that a failed
    # fold is logged and the other apps still tidy up.
    counts = {"metric_rows_folded": pruning.repeat("retired metric rows", metrics.fold_retired)}
    for receiver, answer in outbox_idle.send_robust(sender=None):
        if isinstance(answer, Exception):
            # One app failing stops none of the others; its error is logged with its name.
            logger.error("housekeeping: %s failed", receiver.__qualname__, exc_info=answer)
        elif answer:
            counts.update(answer)
    return counts
