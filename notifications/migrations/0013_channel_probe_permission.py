"""The dashboard's Probe gets a permission of its own (notifications.probe_channel), as Retry
has: a staff member who may only look cannot make the site call a provider."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0012_unreported_claims"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="channeladdress",
            options={
                "permissions": [("probe_channel", "Can probe a channel's provider")],
                "verbose_name": "channel address",
                "verbose_name_plural": "channel addresses",
            },
        ),
    ]
