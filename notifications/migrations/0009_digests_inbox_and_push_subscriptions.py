"""Digests and throttles, the inbox, and web push's subscriptions.

- Digests and throttles: recipients' digest choices, the items gathered into a digest
  delivery, and the throttle windows' counts. digest_items' two foreign keys cascade in the
  database too: retention deletes carriers and notifications in raw SQL, and their items must
  go with them. New tables only: nothing here locks the deliveries table.
- The inbox: Notification.inbox_at is nullable with no default, so adding it rewrites nothing
  (its indexes are the next migration's, built concurrently).
- Web push: the channel addresses' one-active rule is swapped for one that leaves web push out
  (a user has a subscription on each browser) and one that gives a push endpoint one owner,
  in this migration's transaction, so no moment has neither.
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
        migrations.AddField(
            model_name="notification",
            name="inbox_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="in the inbox since"),
        ),
        migrations.AlterField(
            model_name="channeladdress",
            name="address",
            field=models.CharField(
                help_text=(
                    "A Telegram chat id, a Discord user id, a webhook endpoint's URL, or a "
                    "browser's push endpoint."
                ),
                max_length=500,
                verbose_name="address",
            ),
        ),
        # Django drops and names a partial unique constraint's index by its bare name, which
        # misses it in the notifications schema: the indexes are written here by their
        # qualified names, and the state changes as Django would change it.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="channeladdress",
                    name="channel_addresses_one_active",
                ),
                migrations.AddConstraint(
                    model_name="channeladdress",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(
                            ("is_active", True), models.Q(("channel", "webpush"), _negated=True)
                        ),
                        fields=("user", "channel"),
                        name="channel_addresses_one_active",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="channeladdress",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("channel", "webpush"), ("is_active", True)),
                        fields=("channel", "address"),
                        name="channel_addresses_one_push_owner",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    [
                        "DROP INDEX notifications.channel_addresses_one_active",
                        "CREATE UNIQUE INDEX channel_addresses_one_active"
                        " ON notifications.channel_addresses (user_id, channel)"
                        " WHERE is_active AND channel <> 'webpush'",
                        "CREATE UNIQUE INDEX channel_addresses_one_push_owner"
                        " ON notifications.channel_addresses (channel, address)"
                        " WHERE is_active AND channel = 'webpush'",
                    ],
                    reverse_sql=[
                        "DROP INDEX notifications.channel_addresses_one_push_owner",
                        "DROP INDEX notifications.channel_addresses_one_active",
                        "CREATE UNIQUE INDEX channel_addresses_one_active"
                        " ON notifications.channel_addresses (user_id, channel) WHERE is_active",
                    ],
                ),
            ],
        ),
        migrations.CreateModel(
            name="PushSubscription",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "address",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="push_subscription",
                        to="notifications.channeladdress",
                        verbose_name="endpoint",
                    ),
                ),
                ("p256dh", models.CharField(max_length=100, verbose_name="public key")),
                ("auth", models.CharField(max_length=32, verbose_name="authentication secret")),
                (
                    "user_agent",
                    models.CharField(
                        blank=True, default="", max_length=200, verbose_name="browser"
                    ),
                ),
            ],
            options={
                "verbose_name": "push subscription",
                "verbose_name_plural": "push subscriptions",
                "db_table": 'notifications"."push_subscriptions',
            },
        ),
    ]
