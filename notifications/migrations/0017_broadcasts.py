"""Broadcasts: one message to an audience, kept in chunks of its recipients for the drains to
expand (notifications/broadcasts.py), and each notification's broadcast. The key that makes a
recipient's notification once per broadcast is built concurrently by 0018."""

import core.database
import django.contrib.postgres.fields
import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0016_index_to_the_showcase"),
        ("recipients", "0002_audiences"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="BroadcastChunk",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("number", models.PositiveIntegerField(verbose_name="number")),
                (
                    "user_ids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.IntegerField(), verbose_name="recipients"
                    ),
                ),
                ("lane", models.CharField(default="normal", max_length=32, verbose_name="lane")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("pending", "pending"),
                            ("expanding", "expanding"),
                            ("done", "expanded"),
                            ("cancelled", "cancelled"),
                            ("failed", "failed"),
                        ],
                        default="pending",
                        max_length=16,
                        verbose_name="status",
                    ),
                ),
                ("attempts", models.PositiveIntegerField(default=0, verbose_name="attempts")),
                (
                    "attempt_base",
                    models.PositiveIntegerField(default=0, verbose_name="attempts not counted"),
                ),
                ("claimed_at", models.DateTimeField(blank=True, null=True, verbose_name="claimed")),
                (
                    "expanded_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="expanded"),
                ),
                ("error", models.TextField(blank=True, default="", verbose_name="error")),
            ],
            options={
                "verbose_name": "broadcast chunk",
                "verbose_name_plural": "broadcast chunks",
                "db_table": 'notifications"."broadcast_chunks',
            },
        ),
        migrations.CreateModel(
            name="Broadcast",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("audience_label", models.CharField(max_length=200, verbose_name="sent to")),
                ("type", models.CharField(max_length=64, verbose_name="type")),
                (
                    "message_params",
                    models.JSONField(blank=True, default=dict, verbose_name="parameters"),
                ),
                ("channels", models.JSONField(blank=True, null=True, verbose_name="channels")),
                (
                    "action_url",
                    models.CharField(blank=True, default="", max_length=500, verbose_name="link"),
                ),
                ("lane", models.CharField(default="normal", max_length=32, verbose_name="lane")),
                ("send_at", models.DateTimeField(blank=True, null=True, verbose_name="send at")),
                (
                    "cancel_key",
                    models.CharField(
                        blank=True, default="", max_length=200, verbose_name="cancel key"
                    ),
                ),
                ("recipients", models.PositiveIntegerField(default=0, verbose_name="recipients")),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=core.database.DatabaseNow(), verbose_name="created"
                    ),
                ),
                (
                    "cancelled_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="cancelled"),
                ),
                (
                    "audience",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="recipients.audience",
                        verbose_name="audience",
                    ),
                ),
            ],
            options={
                "verbose_name": "broadcast",
                "verbose_name_plural": "broadcasts",
                "db_table": 'notifications"."broadcasts',
                "ordering": ["-created_at"],
                "permissions": [("cancel_broadcast", "Can cancel a broadcast")],
            },
        ),
        migrations.AddField(
            model_name="notification",
            name="broadcast",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="notifications",
                to="notifications.broadcast",
                verbose_name="broadcast",
            ),
        ),
        migrations.AddField(
            model_name="broadcastchunk",
            name="broadcast",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="chunks",
                to="notifications.broadcast",
                verbose_name="broadcast",
            ),
        ),
        migrations.AddIndex(
            model_name="broadcastchunk",
            index=models.Index(
                condition=models.Q(("status__in", ["pending", "expanding"])),
                fields=["status", "id"],
                name="broadcast_chunks_open",
            ),
        ),
        migrations.AddConstraint(
            model_name="broadcastchunk",
            constraint=models.UniqueConstraint(
                fields=("broadcast", "number"), name="broadcast_chunks_once"
            ),
        ),
    ]
