"""The inbox's two partial indexes: its pages (newest first, keyset on inbox_at and id) and
its unread badge. Built with CREATE INDEX CONCURRENTLY, so notifications keep being written
while they build on a large table."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("notifications", "0010_inbox_and_push_subscriptions"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("archived_at__isnull", True), ("inbox_at__isnull", False)),
                fields=["user", "-inbox_at", "-id"],
                name="notifications_inbox",
            ),
        ),
        AddIndexConcurrently(
            model_name="notification",
            index=models.Index(
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
