"""The inbox's column and web push's subscriptions.

Notification.inbox_at is nullable with no default, so adding it rewrites nothing. The
channel addresses' one-active rule is swapped for one that leaves web push out (a user has a
subscription on each browser) and one that gives a push endpoint one owner: both in this
migration's one transaction, so no moment has neither. The inbox's indexes come in 0011,
built concurrently.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0009_digests"),
    ]

    operations = [
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
