"""`manage.py check` for the registry: unknown slugs, bad cadences, duplicate slugs."""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.core import checks

from jobs import cadence, registry

# The path /cron/jobs/due is the sweep's, so no job may be called that.
RESERVED = {"due"}


@checks.register()
def jobs_registry(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    found = []
    entries = registry.registered()
    for slug, count in sorted(Counter(entry.slug for entry in entries).items()):
        if count > 1:
            names = ", ".join(entry.name for entry in entries if entry.slug == slug)
            found.append(
                checks.Error(
                    f"The job slug {slug!r} is registered {count} times ({names}).",
                    hint="Give each job a slug of its own.",
                    id="jobs.E001",
                )
            )
    for entry in entries:
        if entry.slug in RESERVED or not entry.slug.replace("-", "").isalnum():
            found.append(
                checks.Error(
                    f"The job slug {entry.slug!r} ({entry.name}) is not usable in "
                    "/cron/jobs/<slug>.",
                    hint="Use lower-case letters, digits and hyphens, and not 'due'.",
                    id="jobs.E002",
                )
            )
        if problem := cadence.problem(entry.cron):
            found.append(checks.Error(f"The job {entry.slug!r}: {problem}.", id="jobs.E003"))
        if entry.time_limit.total_seconds() <= 0:
            found.append(
                checks.Error(
                    f"The job {entry.slug!r} has a time limit of {entry.time_limit}.",
                    hint="A time limit is a positive duration.",
                    id="jobs.E004",
                )
            )
    known = {entry.slug for entry in entries}
    for slug, expression in settings.JOBS_CADENCES.items():
        if slug not in known:
            found.append(
                checks.Error(
                    f"JOBS_CADENCES names {slug!r}, which is no job.",
                    hint=f"The jobs are: {', '.join(sorted(known)) or 'none'}.",
                    id="jobs.E005",
                )
            )
        elif problem := cadence.problem(expression):
            found.append(
                checks.Error(f"JOBS_CADENCES gives the job {slug!r} {problem}.", id="jobs.E006")
            )
    return found
