from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from notifications.enqueue import send_notification
from notifications.models import Notification
from showcases import notifications as catalogued


class Command(BaseCommand):
    help = "Queue a few demo notifications for a user, once: nothing happens when any exist."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin", help="Recipient (default: admin).")

    def handle(self, *args, username, **options):
        if Notification.objects.exists():
            self.stdout.write("Demo notifications: the outbox has rows already; none added.")
            return
        try:
            user = get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(
                f"No user named {username!r} to send demo notifications to."
            ) from None
        send_notification(
            user=user,
            type="welcome",
            params={"name": user.get_username()},
            channels=["email"],
        )
        for label in ("first", "second", "third"):
            send_notification(
                user=user,
                type=catalogued.MESSAGE,
                params={"label": label},
                channels=["email"],
            )
        self.stdout.write(f"Queued 4 demo notifications for {username} on the email channel.")
