from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection


@pytest.mark.django_db
def test_the_models_and_the_migrations_agree():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_the_indexes_the_queries_rely_on_exist_in_the_notifications_schema():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'notifications' "
            "AND tablename = 'notification_deliveries'"
        )
        indexes = dict(cursor.fetchall())
    assert "deliveries_claim" not in indexes  # the one claim index before the demo lane
    assert indexes["deliveries_claim_real"].endswith(
        "(next_attempt_at, created_at, id) WHERE (((status)::text = 'pending'::text) "
        "AND (NOT ((channel)::text = 'demo'::text)))"
    )
    assert indexes["deliveries_claim_demo"].endswith(
        "(next_attempt_at, created_at, id) WHERE (((channel)::text = 'demo'::text) "
        "AND ((status)::text = 'pending'::text))"
    )
    assert "WHERE ((status)::text = 'processing'::text)" in indexes["deliveries_reap"]
    # Replaced by a later migration: the schema editor must have dropped the old one there.
    assert (
        "(created_at DESC, id DESC) WHERE ((status)::text = 'dead'::text)"
        in (indexes["deliveries_dead"])
    )
