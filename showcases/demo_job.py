"""The jobs page's demo job: a visitor's click runs it, in the request, under a hard budget.

It is a real Job run by the real runner, so its run lands in the log beside the site's own;
it is kept out of the registry because the registry is the site's scheduled work, every entry
of which has a cadence the sweep runs it on, and this one must run only when asked.
"""

from __future__ import annotations

from datetime import timedelta

from django.tasks import task
from django.utils.translation import gettext_lazy as _

from jobs.registry import Job
from notifications import stats
from notifications.models import ShownStatus

SLUG = "demo"
# Well under a request's patience; counting a capped table takes milliseconds.
BUDGET = timedelta(seconds=2)
# The same cap as the public queue counts: a visitor's click must not cost more as the
# table grows.
COUNT_LIMIT = 1000


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
