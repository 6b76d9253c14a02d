"""Digests and throttles: recipients' digest choices, the items gathered into a digest
delivery, and the throttle windows' counts.

digest_items' two foreign keys cascade in the database too: retention deletes carriers and
notifications in raw SQL, and their items must go with them. New tables only: nothing here
locks the deliveries table.
"""

import django.db.models.deletion
import notifications.models
from django.conf import settings
from django.db import migrations, models


# digest_items' foreign keys, which the model leaves to this migration (db_constraint=False):
# Django would make them without ON DELETE CASCADE.
CASCADE_IN_DATABASE = """
ALTER TABLE notifications.digest_items
    ADD CONSTRAINT digest_items_carrier_fk FOREIGN KEY (carrier_id)
        REFERENCES notifications.notification_deliveries (id)
        ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT digest_items_notification_fk FOREIGN KEY (notification_id)
        REFERENCES notifications.notifications (id)
        ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED
"""
NO_CASCADE = """
ALTER TABLE notifications.digest_items
    DROP CONSTRAINT digest_items_carrier_fk,
    DROP CONSTRAINT digest_items_notification_fk
"""


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0008_preferences_and_skipped"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="DigestItem",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "carrier",
                        "notification",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "carrier",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="digest_items",
                        to="notifications.notificationdelivery",
                        verbose_name="digest",
                    ),
                ),
                (
                    "notification",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="digest_items",
                        to="notifications.notification",
                        verbose_name="notification",
                    ),
                ),
                (
                    "joined_at",
                    models.DateTimeField(
                        db_default=models.Func(
                            function="clock_timestamp", output_field=models.DateTimeField()
                        ),
                        verbose_name="joined",
                    ),
                ),
            ],
            options={
                "verbose_name": "digest item",
                "verbose_name_plural": "digest items",
                "db_table": 'notifications"."digest_items',
            },
        ),
        migrations.CreateModel(
            name="DigestChoice",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("category", models.CharField(max_length=64, verbose_name="category")),
                (
                    "cadence",
                    models.CharField(
                        choices=[
                            ("instant", "as it happens"),
                            ("hourly", "hourly digest"),
                            ("daily", "daily digest"),
                            ("weekly", "weekly digest"),
                        ],
                        max_length=16,
                        verbose_name="how often",
                    ),
                ),
                (
                    "hour",
                    models.PositiveSmallIntegerField(blank=True, null=True, verbose_name="at hour"),
                ),
                (
                    "weekday",
                    models.PositiveSmallIntegerField(
                        blank=True, null=True, verbose_name="on weekday"
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(
                        db_default=notifications.models.DatabaseNow(), verbose_name="changed"
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="digest_choices",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="recipient",
                    ),
                ),
            ],
            options={
                "verbose_name": "digest choice",
                "verbose_name_plural": "digest choices",
                "db_table": 'notifications"."digest_choices',
                "constraints": [
                    models.UniqueConstraint(
                        fields=("user", "category"), name="digest_choices_one_each"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(
                                ("cadence", "hourly"),
                                ("hour__isnull", True),
                                ("weekday__isnull", True),
                            ),
                            models.Q(
                                ("cadence", "daily"),
                                ("hour__gte", 0),
                                ("hour__lte", 23),
                                ("weekday__isnull", True),
                            ),
                            models.Q(
                                ("cadence", "weekly"),
                                ("hour__gte", 0),
                                ("hour__lte", 23),
                                ("weekday__gte", 0),
                                ("weekday__lte", 6),
                            ),
                            _connector="OR",
                        ),
                        name="digest_choices_cadence_fields",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="ThrottleCount",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "user",
                        "category",
                        "window_end",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("category", models.CharField(max_length=64)),
                ("window_end", models.DateTimeField()),
                ("sent", models.PositiveIntegerField(db_default=0)),
                (
                    "user",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "db_table": 'notifications"."throttle_counts',
                "indexes": [models.Index(fields=["window_end"], name="throttle_counts_window_end")],
            },
        ),
        migrations.RunSQL(
            CASCADE_IN_DATABASE,
            NO_CASCADE,
        ),
    ]
