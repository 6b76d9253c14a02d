"""The inbox's two partial indexes: its pages, newest first, keyset on (inbox_at, id), and its
unread badge. Built with CREATE INDEX CONCURRENTLY, so notifications keep being written while
they build on a large table; an interrupted build's leftover is dropped first, so migrate can
simply be run again."""

from django.db import migrations, models

from notifications.migrations._concurrently import build_index


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("notifications", "0009_digests_inbox_and_push_subscriptions"),
    ]

    operations = [
        *build_index(
            "notification",
            models.Index(
                condition=models.Q(("archived_at__isnull", True), ("inbox_at__isnull", False)),
                fields=["user", "-inbox_at", "-id"],
                name="notifications_inbox",
            ),
        ),
        *build_index(
            "notification",
            models.Index(
                condition=models.Q(
                    ("archived_at__isnull", True),
                    ("inbox_at__isnull", False),
                    ("read_at__isnull", True),
                ),
                fields=["user", "-inbox_at"],
                name="notifications_inbox_unread",
            ),
        ),
    ]
