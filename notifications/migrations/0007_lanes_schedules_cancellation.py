"""Lanes, scheduled sends, cancellation and the throttled outcome.

- Deliveries gain a lane (the claim takes higher lanes first) and a count of the provider's
  429s (throttles); notifications gain a cancel key; `cancelled` becomes a known status.
- One claim index, (lane, next_attempt_at, created_at, id) over pending rows, replaces the two
  per-lane indexes of the demo split. It is built before they are dropped, so the claim always
  has an index to read.
- provider_rates holds the drains' shared pacing (notifications/pacing.py).

Nothing here rewrites or locks the deliveries table for long, so it can run under load: the
new columns have constant defaults (PostgreSQL records them without rewriting a row), the
indexes are built with CREATE INDEX CONCURRENTLY, and the CHECKs (the status's, the throttle
count's) are added NOT VALID and then validated, which scans the table without blocking writes.
"""

from django.conf import settings
from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations, models

import notifications.models
from notifications.migrations._concurrently import build_index
from notifications.migrations._statuses import DELIVERIES, change_statuses

OLD_STATUSES = ["pending", "processing", "sent", "failed", "dead"]
NEW_STATUSES = [*OLD_STATUSES, "cancelled"]
# The name PostgreSQL gives the CHECK of a column declared inline, as Django declares it.
THROTTLES_CHECK = "notification_deliveries_throttles_check"


PENDING_ORDER = ["next_attempt_at", "created_at", "id"]


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("notifications", "0006_outbox_retention_alive"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ProviderRate",
            fields=[
                ("key", models.CharField(max_length=200, primary_key=True, serialize=False)),
                (
                    "next_slot_at",
                    models.DateTimeField(db_default=notifications.models.DatabaseNow()),
                ),
                ("updated_at", models.DateTimeField(db_default=notifications.models.DatabaseNow())),
            ],
            options={"db_table": 'notifications"."provider_rates'},
        ),
        migrations.AddField(
            model_name="notification",
            name="cancel_key",
            field=models.CharField(
                blank=True, db_default="", default="", max_length=200, verbose_name="cancel key"
            ),
        ),
        migrations.AddField(
            model_name="notificationdelivery",
            name="lane",
            field=models.CharField(
                db_default="normal", default="normal", max_length=32, verbose_name="lane"
            ),
        ),
        # A positive integer's CHECK, added inline as Django would, makes PostgreSQL read every
        # row under the ALTER's exclusive lock (530 ms at 2 M rows): added NOT VALID here, and
        # validated by a scan that does not block writes.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="notificationdelivery",
                    name="throttles",
                    field=models.PositiveIntegerField(
                        db_default=0, default=0, verbose_name="throttled"
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"ALTER TABLE {DELIVERIES} ADD COLUMN throttles integer DEFAULT 0 NOT NULL",
                    f"ALTER TABLE {DELIVERIES} DROP COLUMN throttles",
                ),
                migrations.RunSQL(
                    f"ALTER TABLE {DELIVERIES} ADD CONSTRAINT {THROTTLES_CHECK}"
                    ' CHECK ("throttles" >= 0) NOT VALID',
                    migrations.RunSQL.noop,
                ),
                migrations.RunSQL(
                    f"ALTER TABLE {DELIVERIES} VALIDATE CONSTRAINT {THROTTLES_CHECK}",
                    migrations.RunSQL.noop,
                ),
            ],
        ),
        *change_statuses(OLD_STATUSES, NEW_STATUSES),
        *build_index(
            "notificationdelivery",
            models.Index(
                fields=["lane", *PENDING_ORDER],
                condition=models.Q(status="pending"),
                name="deliveries_claim",
            ),
        ),
        RemoveIndexConcurrently("notificationdelivery", "deliveries_claim_real"),
        RemoveIndexConcurrently("notificationdelivery", "deliveries_claim_demo"),
        *build_index(
            "notification",
            models.Index(
                fields=["cancel_key", "user"],
                condition=~models.Q(cancel_key=""),
                name="notifications_cancel_key",
            ),
        ),
        *build_index(
            "notificationdelivery",
            models.Index(
                fields=["-created_at", "-id"],
                condition=models.Q(status="cancelled"),
                name="deliveries_cancelled",
            ),
        ),
    ]
