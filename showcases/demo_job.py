"""The jobs page's demo job: a visitor's click runs it, in the request, under a hard budget.

It is a real Job run by the real runner, so its run lands in the log beside the site's own;
it is kept out of the registry because the registry is the site's scheduled work, every entry
of which has a cadence the sweep runs it on, and this one must run only when asked.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.db.models.functions import Now
from django.tasks import task
from django.utils.translation import gettext_lazy as _

from jobs.models import JobRun, Trigger
from jobs.registry import Job
from notifications import stats
from notifications.models import ShownStatus

SLUG = "demo"
# Well under a request's patience; counting a capped table takes milliseconds.
BUDGET = timedelta(seconds=2)
# The same cap as the public queue counts: a visitor's click must not cost more as the
# table grows.
COUNT_LIMIT = 1000
# Site-wide, as "Try it" caps the demo queue (showcases/queue_demo.py): visitors together may
# run it this many times a minute, whatever their addresses. Each run is a row in the jobs'
# log and a moment of a web thread; past the cap a run waits until the oldest of the minute's
# runs is a minute old.
SITE_LIMIT = 30
SITE_WINDOW = timedelta(minutes=1)


@task
def count_queue() -> dict:
    """The queue's rows by state, each count stopping at COUNT_LIMIT."""
    depth = stats.queue_depth(limit=COUNT_LIMIT)
    return {state: getattr(depth, state) for state in ShownStatus.values}


DEMO = Job(
    slug=SLUG,
    task=count_queue,
    # No cadence: only a visitor's click runs it.
    cron="",
    time_limit=BUDGET,
    description=_("Counts the queue's rows by state."),
)


def site_wait_seconds() -> int:
    """Seconds until visitors may run the demo job again, site-wide; 0 when they may now.

    Counted from the log itself, as "Try it" counts its queue's rows: two visitors at the very
    edge may both get in, so the cap can be passed by as many requests as run at once."""
    runs = JobRun.objects.filter(slug=SLUG, trigger=Trigger.VISITOR).order_by("-started_at")
    # The SITE_LIMIT-th latest run (runs_slug_recent): while it is within the window, so are
    # SITE_LIMIT runs.
    edge = list(
        runs.annotate(db_now=Now()).values_list("started_at", "db_now")[SITE_LIMIT - 1 :][:1]
    )
    if not edge:
        return 0
    started_at, now = edge[0]
    left = (started_at + SITE_WINDOW - now).total_seconds()
    return math.ceil(left) if left > 0 else 0
