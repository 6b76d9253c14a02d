"""The registry: every job the site runs, by slug.

A job's work is a django.tasks Task (the function, built by Django's @task decorator, so it
can also be enqueued on a task backend); what makes it a job is around it: a slug, a cadence,
a time limit and a one-line description. A Job holds its Task rather than subclassing Task:
Task is a frozen dataclass whose class each backend chooses (backend.task_class), so a
subclass would not survive a backend of its own, and none of Task's backends gives what a
job needs from its runner (one run at a time, a lease, a log).

Registration never raises: a duplicate slug or a bad cadence is kept and reported by
`manage.py check` (jobs/checks.py), with every other problem at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.tasks import Task, task
from django.utils.functional import Promise


@dataclass(frozen=True)
class Job:
    """A plain function run under a slug, on a cadence, within a time limit."""

    slug: str
    task: Task
    cron: str
    time_limit: timedelta
    description: str | Promise  # one translatable line, shown on the jobs page

    @property
    def cadence(self) -> str:
        """The cron expression in force: JOBS_CADENCES's, else the job's own."""
        return dict(settings.JOBS_CADENCES).get(self.slug, self.cron)

    @property
    def name(self) -> str:
        return self.task.module_path


_jobs: list[Job] = []


def job(
    *, slug: str, cron: str, time_limit: timedelta, description: str | Promise
) -> Callable[[Callable], Task]:
    """Register the decorated function as a job; return its Task."""

    def register(function: Callable) -> Task:
        work = function if isinstance(function, Task) else task(function)
        add(Job(slug=slug, task=work, cron=cron, time_limit=time_limit, description=description))
        return work

    return register


def add(entry: Job) -> Job:
    _jobs.append(entry)
    return entry


def remove(entry: Job) -> None:
    _jobs.remove(entry)


def jobs() -> list[Job]:
    """Every registered job, first registration of a slug only, in slug order."""
    seen: dict[str, Job] = {}
    for entry in _jobs:
        seen.setdefault(entry.slug, entry)
    return sorted(seen.values(), key=lambda entry: entry.slug)


def registered() -> list[Job]:
    """Every registration, duplicates included, as made (for the checks)."""
    return list(_jobs)


class UnknownJob(LookupError):
    def __init__(self, slug: str) -> None:
        known = ", ".join(entry.slug for entry in jobs()) or "none"
        super().__init__(f"No job is registered as {slug!r} (known: {known}).")
        self.slug = slug


def get(slug: str) -> Job:
    for entry in jobs():
        if entry.slug == slug:
            return entry
    raise UnknownJob(slug)
