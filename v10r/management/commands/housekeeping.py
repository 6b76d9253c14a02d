from __future__ import annotations

from django.core.management.base import BaseCommand

from v10r import housekeeping


class Command(BaseCommand):
    help = (
        "Delete expired rate-limit windows and sessions and finished demo notifications, a "
        "bounded number of each. drain_outbox does this on its idle ticks; schedule this "
        "command only where no drain loop or cron trigger runs."
    )

    def handle(self, *args, **options):
        tidied = housekeeping.run()
        self.stdout.write(" ".join(f"{name}={n}" for name, n in tidied.as_dict().items()))
