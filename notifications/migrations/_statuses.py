"""What a migration that adds a delivery status does, shared by those that do (0007, 0008).

Django's migration loader skips modules whose names start with an underscore, so this is no
migration itself.
"""

from django.db import migrations, models

DELIVERIES = "notifications.notification_deliveries"


def status_check(statuses: list[str]) -> str:
    known = ", ".join(f"'{s}'" for s in statuses)
    return (
        f"ALTER TABLE {DELIVERIES} DROP CONSTRAINT deliveries_status_known,"
        f' ADD CONSTRAINT deliveries_status_known CHECK ("status" IN ({known})) NOT VALID'
    )


def validate(name: str):
    """Check a constraint added NOT VALID: a scan that does not block writes."""
    sql = f"ALTER TABLE {DELIVERIES} VALIDATE CONSTRAINT {name}"
    return migrations.RunSQL(sql, sql)


def change_statuses(old: list[str], new: list[str], *, state=(), database=()):
    """The status field's choices and its CHECK moved from old to new, with further state and
    database operations (more constraints) in the same step. The CHECK is swapped in one
    ALTER TABLE, so there is no moment without it, and validated without blocking writes."""
    return [
        migrations.AlterField(
            model_name="notificationdelivery",
            name="status",
            field=models.CharField(
                choices=[(s, s) for s in new],
                db_default="pending",
                default="pending",
                max_length=16,
                verbose_name="status",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="notificationdelivery", name="deliveries_status_known"
                ),
                migrations.AddConstraint(
                    model_name="notificationdelivery",
                    constraint=models.CheckConstraint(
                        condition=models.Q(status__in=new), name="deliveries_status_known"
                    ),
                ),
                *state,
            ],
            database_operations=[
                migrations.RunSQL(status_check(new), status_check(old)),
                validate("deliveries_status_known"),
                *database,
            ],
        ),
    ]
