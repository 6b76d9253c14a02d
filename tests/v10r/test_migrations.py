from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, models

from core import ratelimit
from core.models import RateLimitWindow
from notifications.models import NotificationDelivery
from tests.helpers import make_deliveries


def index_definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'notifications' "
            "AND tablename = 'notification_deliveries'"
        )
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_the_indexes_the_queries_rely_on_exist_in_the_notifications_schema():
    indexes = index_definitions()
    assert indexes["deliveries_claim"].endswith(
        "(lane, next_attempt_at, created_at, id) WHERE ((status)::text = 'pending'::text)"
    )
    assert "deliveries_claim_real" not in indexes
    assert "deliveries_claim_demo" not in indexes
    assert "WHERE ((status)::text = 'processing'::text)" in indexes["deliveries_reap"]
    assert indexes["deliveries_retrying"].endswith(
        "(created_at DESC, id DESC) WHERE ((attempts > attempt_base) "
        "AND ((status)::text = 'pending'::text))"
    )
    assert indexes["deliveries_waiting"].endswith(
        "(created_at DESC, id DESC) WHERE ((attempts = attempt_base) "
        "AND ((status)::text = 'pending'::text))"
    )


@pytest.mark.django_db(transaction=True)
def test_a_later_migration_can_rename_and_drop_an_index_in_the_notifications_schema():
    # DROP INDEX and ALTER INDEX … RENAME look the index up on the search_path, where the
    # notifications schema is not: the backend names the schema (v10r/postgresql).
    index = models.Index(fields=["sent_at"], name="deliveries_probe")
    with connection.schema_editor() as editor:
        editor.add_index(NotificationDelivery, index)
    assert "deliveries_probe" in index_definitions()
    with connection.schema_editor() as editor:
        editor.rename_index(
            NotificationDelivery, index, models.Index(fields=["sent_at"], name="deliveries_probe2")
        )
    assert "deliveries_probe2" in index_definitions()
    with connection.schema_editor() as editor:
        editor.remove_index(
            NotificationDelivery, models.Index(fields=["sent_at"], name="deliveries_probe2")
        )
    assert not {"deliveries_probe", "deliveries_probe2"} & set(index_definitions())


def index_validity() -> dict[str, bool]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index AS i"
            " JOIN pg_class AS c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'notifications.notification_deliveries'::regclass"
        )
        return dict(cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_the_covering_index_migration_recovers_from_an_interrupted_build(django_user_model):
    """0005 builds its indexes CONCURRENTLY, outside a transaction; a build that fails leaves
    an invalid index under the new name, and running migrate again must still succeed."""
    make_deliveries(django_user_model.objects.create_user("reader"), 3)
    call_command("migrate", "notifications", "0004", verbosity=0)
    assert "INCLUDE" not in index_definitions()["deliveries_attempted"]
    # A unique build over three rows of one channel fails, and leaves exactly such a leftover.
    with pytest.raises(IntegrityError), connection.cursor() as cursor:
        cursor.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY deliveries_attempted_new"
            " ON notifications.notification_deliveries (channel)"
        )
    assert index_validity()["deliveries_attempted_new"] is False
    call_command("migrate", "notifications", verbosity=0)
    validity = index_validity()
    assert "deliveries_attempted_new" not in validity
    assert validity["deliveries_attempted"] and validity["deliveries_dead"]
    indexes = index_definitions()
    assert indexes["deliveries_attempted"].endswith(
        "(attempted_at) INCLUDE (channel, status, attempts, attempt_base)"
    )
    assert "INCLUDE (channel) WHERE" in indexes["deliveries_dead"]
    assert "INCLUDE (error_code, channel) WHERE" in indexes["deliveries_failed"]


def rate_limit_rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, hits FROM v10r_rate_limit_windows ORDER BY key")
        return cursor.fetchall()


def model_state(app_label: str) -> set[str]:
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    state = executor.loader.project_state(list(executor.loader.applied_migrations))
    return {name for label, name in state.models if label == app_label}


@pytest.mark.django_db(transaction=True)
def test_a_database_migrated_from_zero_has_the_rate_limit_table_in_cores_state():
    assert "ratelimitwindow" in model_state("core")
    assert "ratelimitwindow" not in model_state("v10r")
    ratelimit.hit(key="fresh", limit=1, window=timedelta(minutes=1))
    assert RateLimitWindow.objects.get().key == "fresh"


@pytest.mark.django_db(transaction=True)
def test_a_database_from_before_core_keeps_its_rate_limit_windows_when_migrated():
    # Back to the state every deployed database was in: v10r's 0001 applied, core unknown.
    call_command("migrate", "core", "zero", verbosity=0)
    assert "ratelimitwindow" in model_state("v10r")
    assert "ratelimitwindow" not in model_state("core")
    ratelimit.hit(key="kept", limit=1, window=timedelta(minutes=1))
    ratelimit.hit(key="kept", limit=1, window=timedelta(minutes=1))
    call_command("migrate", verbosity=0)
    assert model_state("core") >= {"ratelimitwindow"}
    assert "ratelimitwindow" not in model_state("v10r")
    assert rate_limit_rows() == [("kept", 2)]
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
