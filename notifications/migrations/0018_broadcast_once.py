"""A recipient's notification once per broadcast: a unique index on (broadcast_id, user_id)
where a broadcast is named, built without holding up the writes to the notifications table
(the table may be large; the index starts empty, but building it reads the table)."""

from django.db import migrations, models

from notifications.migrations._concurrently import drop_leftover

NAME = "notifications_broadcast_once"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("notifications", "0017_broadcasts")]

    operations = [
        drop_leftover(NAME),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddConstraint(
                    model_name="notification",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("broadcast__isnull", False)),
                        fields=("broadcast", "user"),
                        name=NAME,
                    ),
                )
            ],
            database_operations=[
                migrations.RunSQL(
                    f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {NAME} "
                    "ON notifications.notifications (broadcast_id, user_id) "
                    "WHERE broadcast_id IS NOT NULL",
                    reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS notifications.{NAME}",
                )
            ],
        ),
    ]
