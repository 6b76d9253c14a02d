"""unreported_claims: how many of a row's claims the reaper ended (each may have sent it), so
a cancel can say "may have been sent". A constant default: added without a rewrite."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0011_held_from'),
    ]

    operations = [
        migrations.AddField(
            model_name='notificationdelivery',
            name='unreported_claims',
            field=models.PositiveIntegerField(db_default=0, default=0, verbose_name='claims that ended without a report'),
        ),
    ]
