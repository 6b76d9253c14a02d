from __future__ import annotations

from django.core.management.base import BaseCommand

from jobs import cadence, registry, runner
from jobs.management.commands.run_job import refuse_unless_succeeded, write
from jobs.models import Trigger


class Command(BaseCommand):
    help = (
        "--due: run every job whose cadence came due since its last run, once each (a job "
        "missed while the host was down runs once, not once per missed slot). Schedule it "
        "every minute (deploy/systemd/v10r-jobs.timer). --list: the jobs and their cadences."
    )

    def add_arguments(self, parser):
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--due", action="store_true", help="Run the jobs that are due.")
        what.add_argument("--list", action="store_true", help="List the jobs; run none.")

    def handle(self, *args, due, list, **options):
        if list:
            for job in registry.jobs():
                self.stdout.write(
                    f"{job.slug}\t{job.cadence}\t{cadence.words(job.cadence)}\t{job.description}"
                )
            return
        outcomes = runner.sweep(trigger=Trigger.SCHEDULER)
        for outcome in outcomes:
            write(self, outcome)
        refuse_unless_succeeded(outcomes)
        if not outcomes and options["verbosity"] > 1:
            self.stdout.write("No job is due.")
