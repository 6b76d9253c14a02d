"""The dashboard's 24-hour index, Needs attention's and the failed list's carry the columns
their counts read, so those counts are index-only scans.

Each index is built again beside the old one with CREATE INDEX CONCURRENTLY, the old one is
dropped the same way, and the new one takes the old name: on a large table the deliveries
keep being claimed and written while this runs (it takes seconds per million rows), where a
plain CREATE INDEX would block every write to the table until it finished.
"""

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations, models

from notifications.migrations._concurrently import build_index

REBUILT = [
    models.Index(
        fields=["attempted_at"],
        include=["channel", "status", "attempts", "attempt_base"],
        name="deliveries_attempted",
    ),
    models.Index(
        fields=["-created_at", "-id"],
        include=["channel"],
        condition=models.Q(status="dead"),
        name="deliveries_dead",
    ),
    models.Index(
        fields=["-created_at", "-id"],
        include=["error_code", "channel"],
        condition=models.Q(status="failed"),
        name="deliveries_failed",
    ),
]


def rebuild(index: models.Index) -> list:
    building = index.clone()
    building.name = f"{index.name}_new"
    return [
        *build_index("notificationdelivery", building),
        RemoveIndexConcurrently("notificationdelivery", index.name),
        migrations.RenameIndex("notificationdelivery", new_name=index.name, old_name=building.name),
    ]


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("notifications", "0004_channel_addresses_deactivation_and_webhook_secrets"),
    ]

    operations = [operation for index in REBUILT for operation in rebuild(index)]
