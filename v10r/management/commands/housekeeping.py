from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobs import registry, runner
from jobs.management.commands.run_job import exit_on_sigterm
from jobs.models import Status, Trigger


class Command(BaseCommand):
    help = (
        "Run the housekeeping job now: fold retired metric rows, delete expired rate-limit "
        "windows and sessions, unconfirmed sign-ups and finished demo notifications, a "
        "bounded number of each (recorded in the jobs' log). The jobs' sweep (run_jobs "
        "--due) runs it every five minutes."
    )

    def handle(self, *args, **options):
        with exit_on_sigterm():
            outcome = runner.run(registry.get("housekeeping"), trigger=Trigger.COMMAND)
        if outcome.status not in {Status.SUCCEEDED, Status.SKIPPED}:
            raise CommandError(f"housekeeping {outcome.status}: {outcome.error}")
        self.stdout.write(" ".join(f"{name}={n}" for name, n in outcome.result.items()))
