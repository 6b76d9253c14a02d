from django.db import migrations, models


class Migration(migrations.Migration):
    """RateLimitWindow moves here from v10r with its table: the state only, nothing in the
    database changes (v10r's 0001 created the table, under the name it keeps)."""

    initial = True

    dependencies = [("v10r", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RateLimitWindow",
                    fields=[
                        (
                            "key",
                            models.CharField(max_length=200, primary_key=True, serialize=False),
                        ),
                        ("window_start", models.DateTimeField()),
                        ("hits", models.PositiveIntegerField()),
                    ],
                    options={"db_table": "v10r_rate_limit_windows"},
                ),
            ],
            database_operations=[],
        ),
    ]
