from __future__ import annotations

import json
import signal
import threading
from contextlib import contextmanager

from django.core.management.base import BaseCommand, CommandError

from jobs import registry, runner
from jobs.models import Status, Trigger


@contextmanager
def exit_on_sigterm():
    """While inside, SIGTERM (systemd stopping a unit, a platform stopping a one-off) ends the
    process through SystemExit, so the run under way is written down as failed on the way
    out instead of being found abandoned once its lease lapses."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are the main thread's; a command called elsewhere keeps the default
        return

    def stop(signum, frame):
        raise SystemExit("stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def write(command: BaseCommand, outcome: runner.Outcome) -> None:
    """One line of JSON per run; a run that did not succeed ends the command in error."""
    command.stdout.write(json.dumps(outcome.as_dict(), sort_keys=True))


def refuse_unless_succeeded(outcomes: list[runner.Outcome]) -> None:
    bad = [o for o in outcomes if o.status not in {Status.SUCCEEDED, Status.SKIPPED}]
    if bad:
        raise CommandError("; ".join(f"{o.slug} {o.status}: {o.error}" for o in bad))


class Command(BaseCommand):
    help = (
        "Run one job now, whatever its cadence, and record the run (trigger: command). If a "
        "run of the same job is under way anywhere, this one is recorded as skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug", help="The job's slug (manage.py run_jobs --list).")

    def handle(self, *args, slug, **options):
        try:
            job = registry.get(slug)
        except registry.UnknownJob as unknown:
            raise CommandError(str(unknown)) from None
        with exit_on_sigterm():
            outcome = runner.run(job, trigger=Trigger.COMMAND)
        write(self, outcome)
        refuse_unless_succeeded([outcome])
