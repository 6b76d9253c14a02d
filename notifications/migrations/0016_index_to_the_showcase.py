"""A partial index on one channel's rows leaves the engine's model: the app whose rows it serves
owns it now (showcases/migrations/0001_deliveries_demo.py). Django forgets it here.

In the database it stays where that app is installed, so no table is scanned to build it
again; where the app is not (V10R_SHOWCASES=0), it is dropped, as 0001 made it on every
database. A site that removes the app from a database it ran on drops the index first with
`manage.py migrate showcases zero`."""

from django.apps import apps as installed
from django.db import migrations

OWNER = "showcases"
NAME = "deliveries_demo"
CREATE = (
    f"CREATE INDEX IF NOT EXISTS {NAME} "
    "ON notifications.notification_deliveries (created_at) WHERE channel = 'demo'"
)


def drop_unless_owned(apps, schema_editor):
    # The installed apps of this run, not the migration's historical ones: whether the app
    # that owns the index is here is a fact of the site, not of the schema's history.
    if not installed.is_installed(OWNER):
        schema_editor.execute(f"DROP INDEX IF EXISTS notifications.{NAME}")


def restore(apps, schema_editor):
    schema_editor.execute(CREATE)


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0015_recipients_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="notificationdelivery", name=NAME),
            ],
            database_operations=[migrations.RunPython(drop_unless_owned, restore)],
        ),
    ]
