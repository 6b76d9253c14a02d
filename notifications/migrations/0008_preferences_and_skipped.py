"""Recipients' preferences, skipped deliveries and quiet hours.

- channel_preferences holds each recipient's choice for a category on a channel, where it
  differs from the category's default; recipients gain a time zone and quiet hours.
- Deliveries gain `skipped` as a known status, with its reason (skip_reason), and the time
  quiet hours held a row until (held_until).

As in 0007, nothing here locks the deliveries table for long: the new columns are nullable or
have constant defaults, the CHECKs are added NOT VALID and then validated (a scan that does
not block writes), and the skipped index is built concurrently.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import notifications.models
from notifications.migrations._concurrently import build_index
from notifications.migrations._statuses import DELIVERIES, change_statuses, validate

OLD_STATUSES = ["pending", "processing", "sent", "failed", "dead", "cancelled"]
NEW_STATUSES = [*OLD_STATUSES, "skipped"]
SKIP_REASONS = {
    "opted_out": "opted out",
    "no_address": "no address",
    "channel_off": "address turned off",
}
SKIP_REASON_CHECK = (
    "(status = 'skipped' AND skip_reason IN ({})) OR (status <> 'skipped' AND skip_reason = '')"
).format(", ".join(f"'{r}'" for r in SKIP_REASONS))


def refuse_to_drop_skipped_rows(apps, schema_editor):
    """Going back to 0007 with skipped rows would leave rows of a status it does not know,
    under a CHECK that no longer holds; say so before anything is undone."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {DELIVERIES} WHERE status = 'skipped'")
        (skipped,) = cursor.fetchone()
    if skipped:
        raise RuntimeError(
            f"{skipped} deliveries are skipped, a status 0007 does not know. To go back, "
            f"delete them first: DELETE FROM {DELIVERIES} WHERE status = 'skipped';"
        )


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("notifications", "0007_lanes_schedules_cancellation"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ChannelPreference",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("category", models.CharField(max_length=64, verbose_name="category")),
                ("channel", models.CharField(max_length=32, verbose_name="channel")),
                ("enabled", models.BooleanField(verbose_name="on")),
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
                        related_name="channel_preferences",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="recipient",
                    ),
                ),
            ],
            options={
                "verbose_name": "channel preference",
                "verbose_name_plural": "channel preferences",
                "db_table": 'notifications"."channel_preferences',
                "constraints": [
                    models.UniqueConstraint(
                        fields=("user", "category", "channel"), name="channel_preferences_one_each"
                    )
                ],
            },
        ),
        migrations.AlterModelOptions(
            name="recipient",
            options={
                "verbose_name": "recipient's settings",
                "verbose_name_plural": "recipients' settings",
            },
        ),
        migrations.AlterField(
            model_name="recipient",
            name="language",
            field=models.CharField(
                choices=settings.LANGUAGES,
                default=settings.LANGUAGE_CODE,
                max_length=8,
                verbose_name="language",
            ),
        ),
        migrations.AddField(
            model_name="recipient",
            name="time_zone",
            field=models.CharField(
                db_default="UTC", default="UTC", max_length=64, verbose_name="time zone"
            ),
        ),
        migrations.AddField(
            model_name="recipient",
            name="quiet_start",
            field=models.TimeField(blank=True, null=True, verbose_name="quiet hours from"),
        ),
        migrations.AddField(
            model_name="recipient",
            name="quiet_end",
            field=models.TimeField(blank=True, null=True, verbose_name="quiet hours until"),
        ),
        migrations.AddField(
            model_name="recipient",
            name="quiet_email",
            field=models.BooleanField(
                db_default=False, default=False, verbose_name="quiet hours hold email too"
            ),
        ),
        migrations.AddConstraint(
            model_name="recipient",
            constraint=models.CheckConstraint(
                condition=(
                    models.Q(quiet_start__isnull=True, quiet_end__isnull=True)
                    | (
                        models.Q(quiet_start__isnull=False, quiet_end__isnull=False)
                        & ~models.Q(quiet_start=models.F("quiet_end"))
                    )
                ),
                name="recipients_quiet_window_whole",
            ),
        ),
        migrations.AddField(
            model_name="notificationdelivery",
            name="skip_reason",
            field=models.CharField(
                blank=True,
                choices=list(SKIP_REASONS.items()),
                db_default="",
                default="",
                max_length=32,
                verbose_name="why skipped",
            ),
        ),
        migrations.AddField(
            model_name="notificationdelivery",
            name="held_until",
            field=models.DateTimeField(
                blank=True, null=True, verbose_name="held by quiet hours until"
            ),
        ),
        *change_statuses(
            OLD_STATUSES,
            NEW_STATUSES,
            state=[
                migrations.AddConstraint(
                    model_name="notificationdelivery",
                    constraint=models.CheckConstraint(
                        condition=models.Q(status="skipped", skip_reason__in=list(SKIP_REASONS))
                        | (~models.Q(status="skipped") & models.Q(skip_reason="")),
                        name="deliveries_skip_reason_when_skipped",
                    ),
                ),
            ],
            database=[
                migrations.RunSQL(
                    f"ALTER TABLE {DELIVERIES} ADD CONSTRAINT deliveries_skip_reason_when_skipped"
                    f" CHECK ({SKIP_REASON_CHECK}) NOT VALID",
                    f"ALTER TABLE {DELIVERIES} DROP CONSTRAINT deliveries_skip_reason_when_skipped",
                ),
                validate("deliveries_skip_reason_when_skipped"),
            ],
        ),
        *build_index(
            "notificationdelivery",
            models.Index(
                fields=["-created_at", "-id"],
                include=["skip_reason", "channel"],
                condition=models.Q(status="skipped"),
                name="deliveries_skipped",
            ),
        ),
        # Last, so that reversing runs it first.
        migrations.RunPython(migrations.RunPython.noop, refuse_to_drop_skipped_rows),
    ]
