from __future__ import annotations

import json
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from notifications import retention
from notifications.management.arguments import bounded


class Command(BaseCommand):
    help = (
        "Delete finished deliveries once they are old: sent ones after --sent-days, failed "
        "and dead ones after --finished-days, and notifications left with no delivery. "
        "Deletes in batches with a pause between them; safe while drains run. --dry-run "
        "only counts what is due."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what is due; delete nothing."
        )
        parser.add_argument(
            "--sent-days",
            type=bounded(int, low=1, high=36_500),
            help="Keep sent deliveries this many days (default: OUTBOX_KEEP_SENT_DAYS).",
        )
        parser.add_argument(
            "--finished-days",
            type=bounded(int, low=1, high=36_500),
            help="Keep failed and dead deliveries this many days "
            "(default: OUTBOX_KEEP_FINISHED_DAYS).",
        )
        parser.add_argument(
            "--batch",
            type=bounded(int, low=1, high=100_000),
            help="Rows looked at per batch, each its own transaction "
            "(default: OUTBOX_PRUNE_BATCH).",
        )
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
                f"Due: {due['sent']} sent deliveries older than {policy.keep_sent.days} days, "
                f"{due['finished']} failed or dead older than {policy.keep_finished.days} days, "
                f"{due['empty_notifications']} notifications with no delivery. "
                "Nothing was deleted (--dry-run)."
            )
            return
        pruned = retention.prune(policy)
        if pruned.skipped:
            raise CommandError(
                "Another prune is running (started at "
                f"{pruned.other_started_at:%Y-%m-%d %H:%M:%S %Z}); try again when it ends."
            )
        self.stdout.write(json.dumps(pruned.as_dict(), sort_keys=True))
        if pruned.taken_over:
            minutes = round(retention.STALE_RUN.total_seconds() / 60)
            raise CommandError(
                f"This run committed nothing for {minutes} minutes, so another run took over "
                f"pruning; this one stopped after deleting {pruned.deliveries} deliveries."
            )
