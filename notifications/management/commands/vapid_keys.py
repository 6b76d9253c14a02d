"""Print a fresh VAPID key pair as the environment lines the settings read; write nothing.

Standard output carries the key lines and nothing else, so that
`manage.py vapid_keys --subject mailto:… >> /etc/v10r/v10r.env` appends exactly them; what an
operator should know about them goes to standard error."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core import vapid

ADVICE = (
    "Put these lines in the environment of every web and drain process (docs/deploy.md) and "
    "restart them. Keep the pair: a new one ends every browser's push subscription."
)


class Command(BaseCommand):
    help = (
        "Print a fresh VAPID key pair for web push as WEBPUSH_VAPID_* environment lines. "
        "Nothing is stored: put the lines in the site's environment."
    )
    # It makes a key pair and reads nothing of the site: the checks' warnings (web push not
    # set up, the very thing it is run to fix) would only be noise, and need no database.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--subject",
            default="",
            help="Also print WEBPUSH_VAPID_SUBJECT (mailto:… or https://…), checked.",
        )

    def handle(self, *args, subject: str, **options) -> None:
        public, private = vapid.new_pair()
        if subject and (problem := vapid.problem(public=public, private=private, subject=subject)):
            raise CommandError(problem)
        lines = [f"WEBPUSH_VAPID_PUBLIC_KEY={public}", f"WEBPUSH_VAPID_PRIVATE_KEY={private}"]
        if subject:
            lines.append(f"WEBPUSH_VAPID_SUBJECT={subject}")
        self.stdout.write("\n".join(lines))
        if not subject:
            self.stderr.write("No --subject: add a WEBPUSH_VAPID_SUBJECT line of your own.")
        self.stderr.write(ADVICE)
