"""The demo rows' partial index belongs to the showcase: its migration makes it, and the
engine's model no longer declares it."""

from __future__ import annotations

import pytest
from django.db import connection

from notifications.models import NotificationDelivery


@pytest.mark.django_db
def test_the_showcase_owns_the_demo_rows_index_and_the_engine_does_not_declare_it():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes"
            " WHERE schemaname = 'notifications' AND indexname = 'deliveries_demo'"
        )
        [(definition,)] = cursor.fetchall()
    # The showcase's cap, feed and prune (showcases/queue_demo.py) read it.
    assert definition.endswith("(created_at) WHERE ((channel)::text = 'demo'::text)")
    declared = {index.name for index in NotificationDelivery._meta.indexes}
    assert "deliveries_demo" not in declared and "deliveries_claim" in declared
