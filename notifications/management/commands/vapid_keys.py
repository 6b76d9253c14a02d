"""Print a fresh VAPID key pair as the environment lines the settings read; write nothing."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core import vapid


class Command(BaseCommand):
    help = (
        "Print a fresh VAPID key pair for web push as WEBPUSH_VAPID_* environment lines. "
        "Nothing is stored: put the lines in the site's environment."
    )

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
