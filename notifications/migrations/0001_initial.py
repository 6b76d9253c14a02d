# The outbox's tables, in one migration: nothing shipped before it, so the history of how the
# schema got here is the commit log's, not the database's.

import django.db.models.deletion
import notifications.models
import uuid
from django.conf import settings
from django.db import migrations, models


def deliveries_proxy(name, verbose_name, verbose_name_plural):
    """A proxy model of the deliveries table: an admin list of its own, and no table."""
    return migrations.CreateModel(
        name=name,
        fields=[],
        options={
            'verbose_name': verbose_name,
            'verbose_name_plural': verbose_name_plural,
            'proxy': True,
            'indexes': [],
            'constraints': [],
        },
        bases=('notifications.notificationdelivery',),
    )


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # The models' tables live in their own schema; it must exist before them.
        migrations.RunSQL(
            "CREATE SCHEMA IF NOT EXISTS notifications",
            reverse_sql="DROP SCHEMA IF EXISTS notifications CASCADE",
        ),
        migrations.CreateModel(
            name='DrainHeartbeat',
            fields=[
                ('worker', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('host', models.CharField(max_length=200)),
                ('pid', models.PositiveIntegerField(blank=True, null=True)),
                ('interval_seconds', models.FloatField()),
                ('started_at', models.DateTimeField(db_default=notifications.models.DatabaseNow())),
                ('ticked_at', models.DateTimeField(db_default=notifications.models.DatabaseNow())),
                ('stopped_at', models.DateTimeField(blank=True, null=True)),
                ('last_report', models.JSONField(blank=True, default=dict)),
            ],
            options={
                'db_table': 'notifications"."drain_heartbeats',
            },
        ),
        migrations.CreateModel(
            name='Recipient',
            fields=[
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='notification_recipient', serialize=False, to=settings.AUTH_USER_MODEL)),
                ('language', models.CharField(choices=[('en', 'English'), ('ru', 'Russian'), ('de', 'German')], default='en', max_length=8)),
            ],
            options={
                'db_table': 'notifications"."recipients',
            },
        ),
        migrations.CreateModel(
            name='Notification',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('type', models.CharField(max_length=64, verbose_name='type')),
                ('message_key', models.CharField(max_length=100, verbose_name='message')),
                ('message_params', models.JSONField(blank=True, default=dict, verbose_name='parameters')),
                ('action_url', models.CharField(blank=True, max_length=500, verbose_name='link')),
                ('created_at', models.DateTimeField(db_default=notifications.models.DatabaseNow(), verbose_name='created')),
                ('read_at', models.DateTimeField(blank=True, null=True, verbose_name='read')),
                ('archived_at', models.DateTimeField(blank=True, null=True, verbose_name='archived')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to=settings.AUTH_USER_MODEL, verbose_name='recipient')),
            ],
            options={
                'verbose_name': 'notification',
                'verbose_name_plural': 'notifications',
                'db_table': 'notifications"."notifications',
            },
        ),
        migrations.CreateModel(
            name='NotificationDelivery',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('channel', models.CharField(max_length=32, verbose_name='channel')),
                ('status', models.CharField(choices=[('pending', 'pending'), ('processing', 'processing'), ('sent', 'sent'), ('failed', 'failed'), ('dead', 'dead')], db_default='pending', default='pending', max_length=16, verbose_name='status')),
                ('attempts', models.PositiveIntegerField(db_default=0, default=0, verbose_name='attempts')),
                ('attempt_base', models.PositiveIntegerField(db_default=0, default=0, verbose_name='attempts not counted against the budget')),
                ('next_attempt_at', models.DateTimeField(db_default=notifications.models.DatabaseNow(), verbose_name='next attempt')),
                ('attempted_at', models.DateTimeField(blank=True, null=True, verbose_name='last attempt')),
                ('sent_at', models.DateTimeField(blank=True, null=True, verbose_name='sent at')),
                ('provider_message_id', models.CharField(blank=True, db_default='', default='', max_length=255, verbose_name="provider's message id")),
                ('error_code', models.CharField(blank=True, db_default='', default='', max_length=64, verbose_name='error code')),
                ('error_message', models.TextField(blank=True, db_default='', default='', verbose_name='error message')),
                ('created_at', models.DateTimeField(db_default=notifications.models.DatabaseNow(), verbose_name='created')),
                ('notification', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='notifications.notification', verbose_name='notification')),
            ],
            options={
                'verbose_name': 'delivery',
                'verbose_name_plural': 'deliveries',
                'db_table': 'notifications"."notification_deliveries',
                'permissions': [('retry_delivery', 'Can retry a dead or failed delivery')],
            },
        ),
        deliveries_proxy('FailedDelivery', 'failed delivery', 'Failed deliveries'),
        deliveries_proxy('NeedsAttention', 'delivery needing attention', 'Needs attention'),
        migrations.CreateModel(
            name='ChannelAddress',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('channel', models.CharField(max_length=32)),
                ('address', models.CharField(max_length=500)),
                ('is_active', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(db_default=notifications.models.DatabaseNow())),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='channel_addresses', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'notifications"."channel_addresses',
                'constraints': [models.UniqueConstraint(condition=models.Q(('is_active', True)), fields=('user', 'channel'), name='channel_addresses_one_active')],
            },
        ),
        migrations.AddIndex(
            model_name='notification',
            index=models.Index(fields=['user', '-created_at'], name='notifications_user_recent'),
        ),
        migrations.AddIndex(
            model_name='notification',
            index=models.Index(fields=['-created_at'], name='notifications_recent'),
        ),
        *[
            migrations.AddIndex(model_name='notificationdelivery', index=index)
            for index in [
                models.Index(condition=models.Q(('status', 'pending'), models.Q(('channel', 'demo'), _negated=True)), fields=['next_attempt_at', 'created_at', 'id'], name='deliveries_claim_real'),
                models.Index(condition=models.Q(('channel', 'demo'), ('status', 'pending')), fields=['next_attempt_at', 'created_at', 'id'], name='deliveries_claim_demo'),
                models.Index(condition=models.Q(('status', 'processing')), fields=['attempted_at'], name='deliveries_reap'),
                models.Index(condition=models.Q(('channel', 'demo')), fields=['created_at'], name='deliveries_demo'),
                models.Index(fields=['-created_at', '-id'], name='deliveries_recent'),
                models.Index(fields=['attempted_at'], name='deliveries_attempted'),
                models.Index(condition=models.Q(('error_code', ''), _negated=True), fields=['error_code'], name='deliveries_error_code'),
                models.Index(condition=models.Q(('attempts', models.F('attempt_base')), ('status', 'pending')), fields=['-created_at', '-id'], name='deliveries_waiting'),
                models.Index(condition=models.Q(('attempts__gt', models.F('attempt_base')), ('status', 'pending')), fields=['-created_at', '-id'], name='deliveries_retrying'),
                models.Index(condition=models.Q(('status', 'dead')), fields=['-created_at', '-id'], name='deliveries_dead'),
                models.Index(condition=models.Q(('status', 'failed')), fields=['-created_at', '-id'], name='deliveries_failed'),
            ]
        ],
        migrations.AddConstraint(
            model_name='notificationdelivery',
            constraint=models.UniqueConstraint(fields=('notification', 'channel'), name='deliveries_one_per_channel'),
        ),
        migrations.AddConstraint(
            model_name='notificationdelivery',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'processing', 'sent', 'failed', 'dead'])), name='deliveries_status_known'),
        ),
        migrations.AddConstraint(
            model_name='notificationdelivery',
            constraint=models.CheckConstraint(condition=models.Q(('attempt_base__lte', models.F('attempts'))), name='deliveries_attempt_base_not_ahead'),
        ),
    ]
