"""/showcases/jobs/: the registry with its cadences in words, the live log of runs, where this
deployment's pushes come from, and a demo job a visitor runs."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from core import platform, ratelimit
from jobs import cadence, registry, runner
from jobs.models import JobRun, Trigger
from showcases import demo_job
from showcases.views import visitor_post

DEMO_LIMIT = 10
LOG_SIZE = 12
# Visitors' demo runs the log shows beside the site's own LOG_SIZE latest: however many
# visitors run it, the site's runs (retention, housekeeping) stay in view.
DEMO_SHOWN = 4
TEMPLATE = "showcases/jobs.html"


def _now():
    # The database's clock, as the sweep reads it: next slots mean the same on every host.
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def _registry_rows() -> list[dict]:
    now = _now()
    latest = {
        run.slug: run
        for run in JobRun.objects.order_by("slug", "-started_at", "-id").distinct("slug")
    }
    rows = []
    for job in registry.jobs():
        usable = cadence.problem(job.cadence) is None
        rows.append(
            {
                "job": job,
                "words": cadence.words(job.cadence),
                "last": latest.get(job.slug),
                "next": cadence.following(job.cadence, now=now) if usable else None,
            }
        )
    return rows


def _latest_runs() -> list[JobRun]:
    """The site's LOG_SIZE latest runs and the DEMO_SHOWN latest demo runs, newest first."""
    slugs = [job.slug for job in registry.jobs()]
    # One query per slug, each the head of the (slug, started_at) index: a log flooded with
    # demo runs costs a filter on started_at nothing to walk past.
    heads = [JobRun.objects.filter(slug=slug)[:LOG_SIZE] for slug in slugs]
    site = sorted(
        (run for head in heads for run in head),
        key=lambda run: (run.started_at, run.pk),
        reverse=True,
    )[:LOG_SIZE]
    demo = JobRun.objects.filter(slug=demo_job.SLUG)[:DEMO_SHOWN]
    return sorted([*site, *demo], key=lambda run: (run.started_at, run.pk), reverse=True)


def _log_context(*, new_run: int | None = None) -> dict:
    return {"runs": _latest_runs(), "new_run": new_run}


def _pushes() -> dict:
    latest = {}
    for trigger in (Trigger.SCHEDULER, Trigger.CRON):
        latest[trigger.value] = (
            JobRun.objects.filter(trigger=trigger).values_list("started_at", flat=True).first()
        )
    return {
        "platform": platform.current(),
        "cron_secret_set": bool(settings.CRON_SECRET),
        "last_scheduler": latest[Trigger.SCHEDULER.value],
        "last_cron": latest[Trigger.CRON.value],
    }


def _log_messages() -> dict:
    """The live log's sentences, read by jobs-live.js."""
    return {
        "offline": _(
            "This browser is offline, so the log has stopped updating; it picks up again when "
            "the connection is back."
        ),
        "unreachable": _(
            "The server did not answer, so the log has stopped updating; it tries again in "
            "{seconds} s."
        ),
        "runOffline": _("This browser is offline; running the demo job needs the network."),
        "runUnreachable": _(
            "The server could not be reached, so the demo job did not run. Try again in a moment."
        ),
    }


def _page_context(**extra) -> dict:
    return {
        "log_messages": _log_messages(),
        "rows": _registry_rows(),
        "demo": demo_job.DEMO,
        "demo_budget": number_format(int(demo_job.BUDGET.total_seconds())),
        "visitor_label": Trigger.VISITOR.label,
        "cron_seconds": settings.JOBS_CRON_SECONDS,
        **_pushes(),
        **_log_context(),
        **extra,
    }


@require_safe
def jobs(request):
    return render(request, TEMPLATE, _page_context())


@require_safe
def log(request):
    """The latest runs, every job's (polled by jobs-live.js)."""
    return render(request, TEMPLATE + "#log", _log_context())


def _demo_refused(request, verdict: ratelimit.Verdict):
    message = _("Too many runs; wait %(seconds)s s.") % {
        "seconds": number_format(verdict.retry_after_seconds)
    }
    return _refused(request, message=message, retry_after_seconds=verdict.retry_after_seconds)


def _refused(request, *, message: str, retry_after_seconds: int):
    if request.htmx:
        # The refusal travels out of band, to an element the polls leave alone.
        template, context = TEMPLATE + "#log", {**_log_context(), "demo_error_oob": True}
    else:
        template, context = TEMPLATE, _page_context()
    context["demo_error"] = message
    response = ratelimit.refuse(
        response=render(request, template, context),
        status=429,
        retry_after_seconds=retry_after_seconds,
    )
    response["X-Jobs-Fragment"] = "refused"  # swapped in by jobs-live.js all the same
    return response


# Counted per client (an IPv6 /64) before the body is read, as the workers page's Try it.
@visitor_post("demo-job", limit=lambda: DEMO_LIMIT, refusal=_demo_refused)
def run_demo(request):
    """Run the demo job here, in this request, as the visitor's."""
    wait = demo_job.site_wait_seconds()
    if wait:
        # 429, not 503, as "Try it"'s full queue: the site is fine, the demo is busy.
        message = _(
            "Visitors have run the demo job %(count)s times in the last minute, as often as "
            "the site allows; try again in %(seconds)s s."
        ) % {"count": number_format(demo_job.SITE_LIMIT), "seconds": number_format(wait)}
        return _refused(request, message=message, retry_after_seconds=wait)
    outcome = runner.run(demo_job.DEMO, trigger=Trigger.VISITOR, time_limit=demo_job.BUDGET)
    if not request.htmx:
        return redirect(reverse("showcases:jobs") + "#log")
    return render(
        request,
        TEMPLATE + "#log",
        {**_log_context(new_run=outcome.run_id), "demo_error_oob": True},
    )
