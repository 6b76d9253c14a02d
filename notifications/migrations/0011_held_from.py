"""held_from: when a row quiet hours hold was due before they held it, for releasing it
when the recipient changes or clears them. A nullable column: added without a rewrite."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0010_inbox_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="notificationdelivery",
            name="held_from",
            field=models.DateTimeField(
                blank=True, null=True, verbose_name="due before quiet hours held it"
            ),
        ),
    ]
