"""choices_versions: how many times each recipient's choices changed, and the version each
delivery was decided under, so a claim decides again only the rows of recipients who changed
something since. A new table, and a column with a constant default: no rewrite."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('notifications', '0013_channel_probe_permission'),
    ]

    operations = [
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
        migrations.AddField(
            model_name='notificationdelivery',
            name='decided_version',
            field=models.PositiveBigIntegerField(db_default=0, default=0, verbose_name='decided under choices version'),
        ),
    ]
