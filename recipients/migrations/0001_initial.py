"""The recipients' models come to this app from notifications, which made their tables (its
migrations 0004, 0008, 0009 and 0014). The tables stay where they are: this migration changes
what Django knows (SeparateDatabaseAndState: the models, no SQL), and moves their content types,
so every permission granted on them and every admin history entry follows them here."""

import core.database
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models




MOVED = [
    "channeladdress",
    "channelpreference",
    "choicesversion",
    "digestchoice",
    "pushsubscription",
    "recipient",
    "webhooksecret",
]


def _relabel(apps, schema_editor, *, old: str, new: str) -> None:
    types = apps.get_model("contenttypes", "ContentType").objects.using(
        schema_editor.connection.alias
    )
    for model in MOVED:
        # A content type the new label already has (made by a post_migrate that ran between
        # the two halves of this move) holds nothing yet: the old one, which may, replaces it.
        if types.filter(app_label=old, model=model).exists():
            types.filter(app_label=new, model=model).delete()
            types.filter(app_label=old, model=model).update(app_label=new)


def move_content_types(apps, schema_editor):
    _relabel(apps, schema_editor, old="notifications", new="recipients")


def move_content_types_back(apps, schema_editor):
    _relabel(apps, schema_editor, old="recipients", new="notifications")


STATE = [
    migrations.CreateModel(
        name='ChoicesVersion',
        fields=[
            ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to=settings.AUTH_USER_MODEL)),
            ('version', models.PositiveBigIntegerField(db_default=0, default=0, verbose_name='version')),
        ],
        options={
            'verbose_name': 'choices version',
            'verbose_name_plural': 'choices versions',
            'db_table': 'notifications"."choices_versions',
        },
    ),
    migrations.CreateModel(
        name='ChannelAddress',
        fields=[
            ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ('channel', models.CharField(max_length=32, verbose_name='channel')),
            ('address', models.CharField(help_text="A Telegram chat id, a Discord user id, a webhook endpoint's URL, or a browser's push endpoint.", max_length=500, verbose_name='address')),
            ('is_active', models.BooleanField(default=True, verbose_name='active')),
            ('created_at', models.DateTimeField(db_default=core.database.DatabaseNow(), verbose_name='created')),
            ('deactivated_at', models.DateTimeField(blank=True, null=True, verbose_name='deactivated')),
            ('deactivated_reason', models.CharField(blank=True, default='', max_length=500, verbose_name='why')),
            ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='channel_addresses', to=settings.AUTH_USER_MODEL)),
        ],
        options={
            'verbose_name': 'channel address',
            'verbose_name_plural': 'channel addresses',
            'db_table': 'notifications"."channel_addresses',
            'permissions': [('probe_channel', "Can probe a channel's provider")],
        },
    ),
    migrations.CreateModel(
        name='ChannelPreference',
        fields=[
            ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ('category', models.CharField(max_length=64, verbose_name='category')),
            ('channel', models.CharField(max_length=32, verbose_name='channel')),
            ('enabled', models.BooleanField(verbose_name='on')),
            ('updated_at', models.DateTimeField(db_default=core.database.DatabaseNow(), verbose_name='changed')),
            ('user', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='channel_preferences', to=settings.AUTH_USER_MODEL, verbose_name='recipient')),
        ],
        options={
            'verbose_name': 'channel preference',
            'verbose_name_plural': 'channel preferences',
            'db_table': 'notifications"."channel_preferences',
        },
    ),
    migrations.CreateModel(
        name='DigestChoice',
        fields=[
            ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ('category', models.CharField(max_length=64, verbose_name='category')),
            ('cadence', models.CharField(choices=[('instant', 'as it happens'), ('hourly', 'hourly digest'), ('daily', 'daily digest'), ('weekly', 'weekly digest')], max_length=16, verbose_name='how often')),
            ('hour', models.PositiveSmallIntegerField(blank=True, null=True, verbose_name='at hour')),
            ('weekday', models.PositiveSmallIntegerField(blank=True, null=True, verbose_name='on weekday')),
            ('updated_at', models.DateTimeField(db_default=core.database.DatabaseNow(), verbose_name='changed')),
            ('user', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='digest_choices', to=settings.AUTH_USER_MODEL, verbose_name='recipient')),
        ],
        options={
            'verbose_name': 'digest choice',
            'verbose_name_plural': 'digest choices',
            'db_table': 'notifications"."digest_choices',
        },
    ),
    migrations.CreateModel(
        name='PushSubscription',
        fields=[
            ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ('p256dh', models.CharField(max_length=100, verbose_name='public key')),
            ('auth', models.CharField(max_length=32, verbose_name='authentication secret')),
            ('user_agent', models.CharField(blank=True, default='', max_length=200, verbose_name='browser')),
            ('address', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='push_subscription', to='recipients.channeladdress', verbose_name='endpoint')),
        ],
        options={
            'verbose_name': 'push subscription',
            'verbose_name_plural': 'push subscriptions',
            'db_table': 'notifications"."push_subscriptions',
        },
    ),
    migrations.CreateModel(
        name='Recipient',
        fields=[
            ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='notification_recipient', serialize=False, to=settings.AUTH_USER_MODEL)),
            ('language', models.CharField(choices=[('en', 'English'), ('ru', 'Russian'), ('de', 'German')], default='en', max_length=8, verbose_name='language')),
            ('time_zone', models.CharField(db_default='UTC', default='UTC', max_length=64, verbose_name='time zone')),
            ('quiet_start', models.TimeField(blank=True, null=True, verbose_name='quiet hours from')),
            ('quiet_end', models.TimeField(blank=True, null=True, verbose_name='quiet hours until')),
            ('quiet_email', models.BooleanField(db_default=False, default=False, verbose_name='quiet hours hold email too')),
        ],
        options={
            'verbose_name': "recipient's settings",
            'verbose_name_plural': "recipients' settings",
            'db_table': 'notifications"."recipients',
            'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('quiet_end__isnull', True), ('quiet_start__isnull', True)), models.Q(('quiet_end__isnull', False), ('quiet_start__isnull', False), models.Q(('quiet_start', models.F('quiet_end')), _negated=True)), _connector='OR'), name='recipients_quiet_window_whole')],
        },
    ),
    migrations.CreateModel(
        name='WebhookSecret',
        fields=[
            ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ('secret', models.CharField(max_length=200, verbose_name='secret')),
            ('previous_secret', models.CharField(blank=True, max_length=200, verbose_name='previous secret')),
            ('rotated_at', models.DateTimeField(blank=True, null=True, verbose_name='rotated')),
            ('address', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_secret', to='recipients.channeladdress', verbose_name='endpoint')),
        ],
        options={
            'verbose_name': 'webhook secret',
            'verbose_name_plural': 'webhook secrets',
            'db_table': 'notifications"."webhook_secrets',
        },
    ),
    migrations.AddConstraint(
        model_name='channeladdress',
        constraint=models.UniqueConstraint(condition=models.Q(('is_active', True), models.Q(('channel', 'webpush'), _negated=True)), fields=('user', 'channel'), name='channel_addresses_one_active'),
    ),
    migrations.AddConstraint(
        model_name='channeladdress',
        constraint=models.UniqueConstraint(condition=models.Q(('channel', 'webpush'), ('is_active', True)), fields=('channel', 'address'), name='channel_addresses_one_push_owner'),
    ),
    migrations.AddConstraint(
        model_name='channelpreference',
        constraint=models.UniqueConstraint(fields=('user', 'category', 'channel'), name='channel_preferences_one_each'),
    ),
    migrations.AddConstraint(
        model_name='digestchoice',
        constraint=models.UniqueConstraint(fields=('user', 'category'), name='digest_choices_one_each'),
    ),
    migrations.AddConstraint(
        model_name='digestchoice',
        constraint=models.CheckConstraint(condition=models.Q(models.Q(('cadence', 'hourly'), ('hour__isnull', True), ('weekday__isnull', True)), models.Q(('cadence', 'daily'), ('hour__gte', 0), ('hour__lte', 23), ('weekday__isnull', True)), models.Q(('cadence', 'weekly'), ('hour__gte', 0), ('hour__lte', 23), ('weekday__gte', 0), ('weekday__lte', 6)), _connector='OR'), name='digest_choices_cadence_fields'),
    ),
]


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('notifications', '0014_choices_versions'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=STATE),
        migrations.RunPython(move_content_types, move_content_types_back, elidable=False),
    ]
