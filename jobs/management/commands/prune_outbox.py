from __future__ import annotations

import json
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from jobs import registry, runner, tasks
from jobs.management.commands.run_job import exit_on_sigterm
from jobs.models import Status, Trigger
from notifications import retention
from notifications.management.arguments import bounded

WHOLE = timedelta(days=1)
DAYS = bounded(int, low=1, high=36_500)

# The options that stand in for a setting for one run: (flag, type, what it sets, the
# setting used when it is not given).
OVERRIDES = (
    ("--sent-days", DAYS, "Keep sent deliveries this many days", "OUTBOX_KEEP_SENT_DAYS"),
    (
        "--finished-days",
        DAYS,
        "Keep failed and dead deliveries this many days",
        "OUTBOX_KEEP_FINISHED_DAYS",
    ),
    (
        "--batch",
        bounded(int, low=1, high=100_000),
        "Rows looked at per batch, each its own transaction",
        "OUTBOX_PRUNE_BATCH",
    ),
)


class Command(BaseCommand):
    help = (
        "Delete finished deliveries once they are old: sent ones after --sent-days, failed "
        "and dead ones after --finished-days, and notifications left with no delivery. "
        "Deletes in batches with a pause between them; safe while drains run. Runs the "
        "prune-outbox job (recorded in its log, one run at a time; it also deletes old job "
        "runs) until nothing is due, a day at most, or --max-seconds. --dry-run only "
        "counts what is due."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what is due; delete nothing."
        )
        for flag, kind, what, setting in OVERRIDES:
            parser.add_argument(flag, type=kind, help=f"{what} (default: {setting}).")
        parser.add_argument(
            "--pause",
            type=bounded(float, low=0, high=60),
            default=0.05,
            help="Seconds to wait between batches (default %(default)s).",
        )
        parser.add_argument(
            "--max-seconds",
            type=bounded(float, low=0.1, high=86_400),
            help="Stop after this long (at most a day); the next run carries on where this "
            "one stopped.",
        )

    def handle(self, *args, dry_run, sent_days, finished_days, batch, pause, max_seconds, **_):
        try:
            policy = retention.RetentionPolicy.from_settings(
                keep_sent=timedelta(days=sent_days) if sent_days else None,
                keep_finished=timedelta(days=finished_days) if finished_days else None,
                batch=batch,
                pause=pause,
                max_seconds=max_seconds,
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        if dry_run:
            due = retention.due(policy)
            self.stdout.write(
                f"Due: {due['sent']} sent and {due['skipped']} skipped deliveries older than "
                f"{policy.keep_sent.days} days, {due['finished']} failed, dead or cancelled "
                f"older than {policy.keep_finished.days} days, "
                f"{due['empty_notifications']} notifications with no delivery. "
                "Nothing was deleted (--dry-run)."
            )
            return
        changes = {
            "keep_sent": policy.keep_sent,
            "keep_finished": policy.keep_finished,
            "batch": policy.batch,
            "pause": policy.pause,
        }
        job = registry.get("prune-outbox")
        # By hand, a prune works until nothing is due (or --max-seconds), not within the
        # scheduled job's time limit; a day bounds it all the same.
        changes["max_seconds"] = max_seconds or WHOLE.total_seconds()
        limit = timedelta(seconds=changes["max_seconds"]) + 2 * tasks.MARGIN
        with exit_on_sigterm():
            outcome = runner.run(job, trigger=Trigger.COMMAND, time_limit=limit, arguments=changes)
        if outcome.status == Status.SKIPPED:
            raise CommandError(
                f"Another prune is running (run #{outcome.result.get('running_run')}); try "
                "again when it ends."
            )
        if outcome.status != Status.SUCCEEDED:
            raise CommandError(f"The prune {outcome.status}: {outcome.error}")
        self.stdout.write(json.dumps(outcome.result, sort_keys=True))
