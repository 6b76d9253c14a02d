from django.db import migrations


class Migration(migrations.Migration):
    """RateLimitWindow now lives in core (core's 0001): v10r forgets it, and its table stays
    where it is, rows and all."""

    dependencies = [("v10r", "0001_initial"), ("core", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="RateLimitWindow")],
            database_operations=[],
        ),
    ]
