"""The demo rows' partial index, for the showcase's site-wide cap, its feed and its pruning
(showcases/queue_demo.py). The showcase has no models: the index is on the engine's deliveries
table, so it is written in SQL, and owned here so that a site without the showcase has none.

A database migrated with the showcase installed has it already (notifications' 0001 made it,
and 0016 kept it): IF NOT EXISTS leaves that one as it is. A database migrated without the
showcase has none (0016 dropped it), and gets it here when the showcase is installed.
Reversed (`migrate showcases zero`), it is dropped.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0016_index_to_the_showcase"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX IF NOT EXISTS deliveries_demo "
            "ON notifications.notification_deliveries (created_at) WHERE channel = 'demo'",
            reverse_sql="DROP INDEX IF EXISTS notifications.deliveries_demo",
        ),
    ]
