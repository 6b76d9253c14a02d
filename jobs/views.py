from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import JsonResponse

from core import cron
from jobs import registry, runner
from jobs.models import Status, Trigger

# What a run's status answers a cron with: a run that failed or ran out of time is the
# work's failure, not the request's (502, so a cron service counts it as failed); a run
# skipped because another of its slug is under way is a conflict.
ANSWERS = {Status.SKIPPED: 409, Status.FAILED: 502, Status.TIMED_OUT: 502}


def _budget() -> timedelta:
    return timedelta(seconds=settings.JOBS_CRON_SECONDS)


@cron.endpoint(key="cron:jobs", what="job sweeps")
def cron_due(request):
    """The sweep: run every job that is due, within JOBS_CRON_SECONDS."""
    outcomes = runner.sweep(trigger=Trigger.CRON, budget=_budget())
    status = max((ANSWERS.get(o.status, 200) for o in outcomes), default=200)
    # A skipped run in a sweep is normal (another host's sweep got there first).
    status = 200 if status == 409 else status
    return JsonResponse({"runs": [o.as_dict() for o in outcomes]}, status=status)


@cron.endpoint(key="cron:jobs", what="job runs")
def cron_job(request, slug):
    """Run one job now, within JOBS_CRON_SECONDS or its own time limit if shorter."""
    try:
        job = registry.get(slug)
    except registry.UnknownJob as unknown:
        return JsonResponse({"error": str(unknown)}, status=404)
    outcome = runner.run(job, trigger=Trigger.CRON, time_limit=min(job.time_limit, _budget()))
    return JsonResponse(outcome.as_dict(), status=ANSWERS.get(outcome.status, 200))
