"""A database migrated to a landed commit, with rows in every table, migrates forward to
today's migrations and keeps every row (issue 35, point 4).

The test builds such a database itself, on the test server, from this project's own migrations
(they are never squashed, so old commits' names still exist), at c5d05f1 (the commit issue 35
was written at) and at b0897c1 (the last before the recipients' models left notifications/;
it adds ChoicesVersion, one of them). Everything about the database after the migration is
found, not named: tables from information_schema, models by the table they own, so the test
holds whichever app a model has moved to.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from uuid import UUID

import psycopg
import pytest
from django.apps import apps
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Model, Q

ALIAS = "migrate_forward"

# The leaf migrations of each commit a deployment may be at, app by app (`git ls-tree -r
# <commit> --name-only | grep migrations/`); accounts had none at c5d05f1. Django's contrib apps
# are taken at their own leaves: their migrations are Django's to test, and the project pins one
# Django minor.
LANDED = {
    "c5d05f1": {
        "core": "0001_initial",
        "jobs": "0001_initial",
        "notifications": "0010_inbox_indexes",
        "v10r": "0002_rate_limit_window_moves_to_core",
    },
    "b0897c1": {
        "accounts": "0001_initial",
        "core": "0001_initial",
        "jobs": "0001_initial",
        "notifications": "0014_choices_versions",
        "v10r": "0002_rate_limit_window_moves_to_core",
    },
}
CONTRIB = ("admin", "auth", "contenttypes", "sessions")

# Tables that may leave the database, each with the reason it is safe to lose their rows.
VANISHED: dict[str, str] = {}

# Columns whose values a forward migration may rewrite, each with the reason and the check that
# holds them instead.
REWRITTEN = {
    "public.django_content_type": {
        "app_label": "a model that moves app takes its content type along, id and all: "
        "test_a_database_at_a_landed_commit_migrates_forward_with_every_row checks each by "
        "its model",
    },
}

# Models of a landed commit (app_label.model) that may be gone today, each with the reason.
GONE_MODELS: dict[str, str] = {}

AT = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)


# --- The database ----------------------------------------------------------------------------


@pytest.fixture
def scratch_database(django_db_blocker):
    """A database of its own on the test server, named so parallel runs cannot share one, and
    dropped afterwards; it is reached through connections[ALIAS]."""
    name = f"v10r_forward_{os.getpid()}_{secrets.token_hex(4)}"
    with django_db_blocker.unblock():
        default = connections["default"]
        # First, so the embedded server is running and its socket is in the settings copied.
        params = default.get_connection_params()
        server = {
            key: params[key] for key in ("host", "port", "user", "password") if params.get(key)
        }
        with psycopg.connect(**server, dbname="postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        connections.settings[ALIAS] = {**default.settings_dict, "NAME": name}
        try:
            yield connections[ALIAS]
        finally:
            connections[ALIAS].close()
            del connections[ALIAS]
            del connections.settings[ALIAS]
            # Its cache is by alias: a later test's database under the same alias is another.
            ContentType.objects.clear_cache()
            with psycopg.connect(**server, dbname="postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_to(commit: str, *, connection):
    """Migrate to commit's leaf migrations and create its content types and permissions, as its
    `manage.py migrate` did; return the models as they were then."""
    executor = MigrationExecutor(connection)
    targets = [*LANDED[commit].items()] + [
        node for node in executor.loader.graph.leaf_nodes() if node[0] in CONTRIB
    ]
    plan = executor.migration_plan(targets)
    executor.migrate(targets, plan=plan)
    old = executor.loader.project_state(targets).apps
    emit_post_migrate_signal(0, False, connection.alias, apps=old, plan=plan)
    return old


# --- Rows in every table ---------------------------------------------------------------------


def fill(old, *, using: str) -> dict[str, Model]:
    """Put realistic rows in every table, through the models of the commit migrated to; return
    a few."""

    def objects(label: str):
        return old.get_model(label)._base_manager.db_manager(using)

    users = objects("auth.User")
    staff = users.create(
        username="ops", email="ops@example.com", password="!", is_staff=True, date_joined=AT
    )
    reader = users.create(
        username="reader", email="reader@example.com", password="!", date_joined=AT
    )

    content_types = objects("contenttypes.ContentType")
    recipient_type = content_types.get(app_label="notifications", model="recipient")
    address_type = content_types.get(app_label="notifications", model="channeladdress")
    permissions = objects("auth.Permission")
    granted = [
        permissions.get(content_type=recipient_type, codename="change_recipient"),
        permissions.get(content_type=address_type, codename="change_channeladdress"),
    ]
    support = objects("auth.Group").create(name="support")
    support.permissions.add(*granted)
    staff.groups.add(support)
    staff.user_permissions.add(*granted)
    objects("admin.LogEntry").create(
        action_time=AT,
        user=staff,
        content_type=recipient_type,
        object_id=str(reader.pk),
        object_repr="reader",
        action_flag=2,
        change_message='[{"changed": {"fields": ["Language"]}}]',
    )
    objects("sessions.Session").create(
        session_key="k" * 32, session_data="e30:signed", expire_date=AT + timedelta(days=14)
    )
    objects("core.RateLimitWindow").create(key="sign-in:203.0.113.9", window_start=AT, hits=3)
    runs = objects("jobs.JobRun")
    runs.create(
        slug="prune",
        trigger="scheduler",
        status="succeeded",
        slot_at=AT,
        started_at=AT,
        finished_at=AT + timedelta(seconds=2),
        duration=timedelta(seconds=2),
        deadline_at=AT + timedelta(minutes=5),
        result={"pruned": 12},
        host="web-1",
        pid=4242,
    )
    runs.create(
        slug="fold-metrics",
        trigger="cron",
        status="running",
        started_at=AT,
        deadline_at=AT + timedelta(minutes=5),
        lease_expires_at=AT + timedelta(minutes=1),
        host="web-2",
        pid=4343,
    )

    recipients = objects("notifications.Recipient")
    recipients.create(
        user=reader,
        language="ru",
        time_zone="Europe/Berlin",
        quiet_start=time(22),
        quiet_end=time(7),
        quiet_email=True,
    )
    recipients.create(user=staff, language="de")
    objects("notifications.ChannelPreference").create(
        user=reader, category="account", channel="telegram", enabled=False
    )
    digest_choices = objects("notifications.DigestChoice")
    digest_choices.create(user=reader, category="queue", cadence="daily", hour=8)
    digest_choices.create(user=staff, category="queue", cadence="weekly", hour=9, weekday=0)

    addresses = objects("notifications.ChannelAddress")
    webhook = addresses.create(user=reader, channel="webhook", address="https://hooks.example/v10r")
    push = addresses.create(
        user=reader, channel="webpush", address="https://push.example/send/abc123"
    )
    addresses.create(
        user=reader,
        channel="telegram",
        address="123456789",
        is_active=False,
        deactivated_at=AT,
        deactivated_reason="bot blocked by the user",
    )
    objects("notifications.WebhookSecret").create(
        address=webhook, secret="whsec_new", previous_secret="whsec_old", rotated_at=AT
    )
    objects("notifications.PushSubscription").create(
        address=push, p256dh="B" + "p" * 86, auth="a" * 22, user_agent="Firefox/140"
    )

    notifications = objects("notifications.Notification")
    welcome = notifications.create(
        id=UUID("00000000-0000-4000-8000-000000000001"),
        user=reader,
        type="account.welcome",
        message_key="account.welcome",
        message_params={"name": "Reader"},
        action_url="/inbox/",
        inbox_at=AT,
        read_at=AT + timedelta(hours=1),
    )
    reminder = notifications.create(
        id=UUID("00000000-0000-4000-8000-000000000002"),
        user=reader,
        type="queue.reminder",
        message_key="queue.reminder",
        cancel_key="reminder:7",
    )
    digested = notifications.create(
        id=UUID("00000000-0000-4000-8000-000000000003"),
        user=reader,
        type="queue.finished",
        message_key="queue.finished",
        message_params={"label": "n3"},
        archived_at=AT,
    )
    digest = notifications.create(
        id=UUID("00000000-0000-4000-8000-000000000004"),
        user=reader,
        type="digest",
        message_key="digest",
    )
    deliveries = objects("notifications.NotificationDelivery")
    deliveries.create(
        notification=welcome,
        channel="email",
        status="sent",
        attempts=1,
        attempted_at=AT,
        sent_at=AT,
        provider_message_id="<1@mail.example>",
    )
    deliveries.create(
        notification=welcome,
        channel="webhook",
        status="failed",
        attempts=2,
        next_attempt_at=AT + timedelta(minutes=4),
        attempted_at=AT,
        error_code="http_503",
        error_message="Service Unavailable",
    )
    deliveries.create(
        notification=welcome,
        channel="webpush",
        status="dead",
        attempts=5,
        attempt_base=1,
        attempted_at=AT,
        error_code="gone",
    )
    deliveries.create(
        notification=welcome,
        channel="telegram",
        status="pending",
        lane="high",
        throttles=2,
        held_until=AT + timedelta(hours=9),
    )
    deliveries.create(notification=welcome, channel="discord", status="processing", attempts=1)
    deliveries.create(notification=reminder, channel="email", status="cancelled")
    deliveries.create(
        notification=reminder, channel="telegram", status="skipped", skip_reason="opted_out"
    )
    carrier = deliveries.create(notification=digest, channel="email", status="pending")
    objects("notifications.DigestItem").create(carrier=carrier, notification=digested)
    objects("notifications.ThrottleCount").create(
        user=reader, category="queue", window_end=AT + timedelta(hours=1), sent=3
    )
    objects("notifications.ProviderRate").create(key="telegram:bot", next_slot_at=AT)
    objects("notifications.DrainHeartbeat").create(
        worker="web-1:4242", host="web-1", pid=4242, interval_seconds=1.0, last_report={"sent": 4}
    )
    metrics = objects("notifications.DrainMetric")
    metrics.create(worker="web-1:4242", metric="sent", label="email", value=4.0)
    metrics.create(worker="web-1:4242", metric="send_seconds", label="email", value=0.25)
    objects("notifications.OutboxRetention").create(
        id=1, last_started_at=AT, last_finished_at=AT, last_report={"pruned": 12}, alive_at=AT
    )

    # What came after c5d05f1, where the commit has it.
    labels = {model._meta.label for model in old.get_models()}
    if "notifications.ChoicesVersion" in labels:
        objects("notifications.ChoicesVersion").create(user=reader, version=3)
        deliveries.filter(channel="telegram").update(
            held_from=AT, unreported_claims=1, decided_version=3
        )
    if "accounts.PendingSignUp" in labels:
        newcomer = users.create(username="newcomer", email="new@example.com", password="!")
        objects("accounts.PendingSignUp").create(user=newcomer, asked_at=AT)
    return {"reader": reader, "staff": staff, "support": support}


# --- Snapshots -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the primary key's columns; every column when it has none
    rows: tuple[tuple, ...]


Snapshot = dict[str, Table]  # by "schema.table"

TABLES_SQL = """
    SELECT table_schema, table_name FROM information_schema.tables
    WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
    ORDER BY 1, 2
"""

COLUMNS_SQL = """
    SELECT column_name FROM information_schema.columns
    WHERE table_schema = %(schema)s AND table_name = %(table)s
    ORDER BY ordinal_position
"""

# The catalogue's own record of the key (pg_index.indkey holds its columns in order), whoever
# owns the table: information_schema's constraint views show only tables the user has rights on.
PRIMARY_KEY_SQL = """
    SELECT a.attname
    FROM pg_index AS i
    JOIN pg_class AS c ON c.oid = i.indrelid
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = ANY (i.indkey)
    WHERE n.nspname = %(schema)s AND c.relname = %(table)s AND i.indisprimary
    ORDER BY array_position(i.indkey::int2[], a.attnum)
"""


def snapshot(connection) -> Snapshot:
    """Every row of every table in connection's database, all columns, by primary key."""
    quote = connection.ops.quote_name
    tables = {}
    with connection.cursor() as cursor:
        cursor.execute(TABLES_SQL)
        for schema, table in cursor.fetchall():
            names = {"schema": schema, "table": table}
            cursor.execute(COLUMNS_SQL, names)
            columns = tuple(column for (column,) in cursor.fetchall())
            cursor.execute(PRIMARY_KEY_SQL, names)
            key = tuple(column for (column,) in cursor.fetchall()) or columns
            cursor.execute(
                f"SELECT {', '.join(map(quote, columns))} FROM {quote(schema)}.{quote(table)}"
                f" ORDER BY {', '.join(map(quote, key))}"
            )
            tables[f"{schema}.{table}"] = Table(columns, key, tuple(cursor.fetchall()))
    return tables


def pick(table: Table, row: tuple, columns) -> tuple:
    """row's values in columns, in that order."""
    return tuple(row[table.columns.index(column)] for column in columns)


def losses(before: Snapshot, after: Snapshot) -> list[str]:
    """Say, a line each, what of before is missing from after: a table, a column, a row, a
    value. New tables, columns and rows are no loss; VANISHED tables and REWRITTEN columns are
    not compared."""
    found = []
    for name, old in before.items():
        if name in VANISHED:
            continue
        if (new := after.get(name)) is None:
            found.append(f"{name}: the table is gone")
            continue
        kept = [column for column in old.columns if column not in REWRITTEN.get(name, {})]
        if gone := [column for column in kept if column not in new.columns]:
            found.append(f"{name}: columns {gone} are gone")
            continue
        now = {pick(new, row, old.key): pick(new, row, kept) for row in new.rows}
        for row in old.rows:
            key = pick(old, row, old.key)
            said = dict(zip(old.key, key, strict=True))
            if (current := now.get(key)) is None:
                found.append(f"{name}: the row {said} is gone")
            elif current != (values := pick(old, row, kept)):
                changed = {
                    column: (was, is_now)
                    for column, was, is_now in zip(kept, values, current, strict=True)
                    if was != is_now
                }
                found.append(f"{name}: the row {said} changed (before, after): {changed}")
    return found


# --- Today's models, wherever they live ------------------------------------------------------


def qualified(db_table: str) -> str:
    """A model's db_table as the snapshot names it: 'notifications"."x' → 'notifications.x'."""
    return db_table.replace('"."', ".") if '"."' in db_table else f"public.{db_table}"


def identity(model) -> tuple[str, str]:
    """What a model is, whichever app holds it: its table (its concrete model's, for a proxy)
    and its name."""
    return qualified(model._meta.concrete_model._meta.db_table), model._meta.model_name


def model_owning(table: str) -> type[Model]:
    """Today's model whose table is table."""
    [model] = [
        model
        for model in apps.get_models()
        if not model._meta.proxy and qualified(model._meta.db_table) == table
    ]
    return model


# --- Tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", LANDED)
def test_a_database_at_a_landed_commit_migrates_forward_with_every_row(commit, scratch_database):
    old = migrate_to(commit, connection=scratch_database)
    rows = fill(old, using=ALIAS)
    before = snapshot(scratch_database)
    empty = [name for name, table in before.items() if not table.rows]
    assert not empty, f"tables of {commit} with no row to keep, so nothing proven: {empty}"

    # What a deployment runs: every migration of today, then the post_migrate handlers
    # (content types and permissions for new models).
    call_command("migrate", database=ALIAS, interactive=False, verbosity=0)
    after = snapshot(scratch_database)

    lost = losses(before, after)
    assert not lost, "lost by migrating forward:\n" + "\n".join(lost)

    # Today's models read every row of the tables they own, every column of theirs included.
    for model in apps.get_models(include_auto_created=True):
        table = qualified(model._meta.db_table)
        if model._meta.proxy or not model._meta.managed or table not in before:
            continue
        read = list(model._base_manager.using(ALIAS).all())
        assert len(read) == len(after[table].rows), model._meta.label

    # Each content type of the commit is still its model's, wherever the model lives now:
    # permissions, admin log entries and generic relations point at it by id.
    today = {identity(model): model for model in apps.get_models()}
    content_types = before["public.django_content_type"]
    for row in content_types.rows:
        found = dict(zip(content_types.columns, row, strict=True))
        label = f"{found['app_label']}.{found['model']}"
        if label in GONE_MODELS:
            continue
        model = today.get(identity(old.get_model(found["app_label"], found["model"])))
        assert model is not None, f"{commit}'s {label} has no model today"
        now = ContentType.objects.db_manager(ALIAS).get_for_model(model, for_concrete_model=False)
        assert now.pk == found["id"], (
            f"{model._meta.label} has a new content type (id {now.pk}); {commit}'s {label} "
            f"(id {found['id']}) was not moved with it"
        )

    recipient = model_owning("notifications.recipients")
    address = model_owning("notifications.channel_addresses")
    assert recipient.objects.using(ALIAS).count() == 2
    assert address.objects.using(ALIAS).count() == 3

    support = Group.objects.using(ALIAS).get(pk=rows["support"].pk)
    granted = {permission.content_type.model_class() for permission in support.permissions.all()}
    assert granted == {recipient, address}
    # The names the staff member's permissions go by, as ModelBackend.has_perm spells them
    # (it reads the default database only).
    held = {
        f"{permission.content_type.app_label}.{permission.codename}"
        for permission in Permission.objects.using(ALIAS).filter(
            Q(user=rows["staff"].pk) | Q(group__user=rows["staff"].pk)
        )
    }
    assert held == {
        f"{recipient._meta.app_label}.change_recipient",
        f"{address._meta.app_label}.change_channeladdress",
    }
    entry = LogEntry.objects.using(ALIAS).get()
    assert entry.content_type.model_class() is recipient
    edited = entry.content_type.get_object_for_this_type(using=ALIAS, pk=entry.object_id)
    assert edited.pk == rows["reader"].pk
    assert edited.language == "ru"


def table(*rows: tuple, columns=("id", "name")) -> Table:
    return Table(columns=columns, key=("id",), rows=rows)


@pytest.mark.parametrize(
    ("after", "found"),
    [
        # Nothing lost: the same rows, or more rows, or a column more.
        ({"public.t": table((1, "a"), (2, "b"))}, []),
        ({"public.t": table((1, "a"), (2, "b"), (3, "c"))}, []),
        (
            {"public.t": table((1, "a", True), (2, "b", False), columns=("id", "name", "new"))},
            [],
        ),
        # A row deleted.
        ({"public.t": table((1, "a"))}, ["public.t: the row {'id': 2} is gone"]),
        # A value changed.
        (
            {"public.t": table((1, "a"), (2, "B"))},
            ["public.t: the row {'id': 2} changed (before, after): {'name': ('b', 'B')}"],
        ),
        # A column dropped.
        ({"public.t": table((1,), (2,), columns=("id",))}, ["public.t: columns ['name'] are gone"]),
        # The table dropped, or moved to another schema.
        ({"other.t": table((1, "a"), (2, "b"))}, ["public.t: the table is gone"]),
    ],
)
def test_the_comparison_finds_every_kind_of_loss(after, found):
    assert losses({"public.t": table((1, "a"), (2, "b"))}, after) == found


def test_a_content_type_may_change_app_but_keeps_its_row_and_model_name():
    def content_types(*rows: tuple) -> Snapshot:
        return {"public.django_content_type": table(*rows, columns=("id", "app_label", "model"))}

    before = content_types((21, "notifications", "recipient"))
    assert losses(before, content_types((21, "recipients", "recipient"))) == []
    assert losses(before, content_types((22, "recipients", "recipient"))) == [
        "public.django_content_type: the row {'id': 21} is gone"
    ]
    assert losses(before, content_types((21, "notifications", "addressee"))) == [
        "public.django_content_type: the row {'id': 21} changed (before, after): "
        "{'model': ('recipient', 'addressee')}"
    ]
