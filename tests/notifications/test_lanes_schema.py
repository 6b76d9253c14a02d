"""Migration 0007's schema, as PostgreSQL holds it: one claim index for every lane, the
cancel key's and the cancelled rows' indexes, the status CHECK that knows cancelled, and the
new columns' defaults."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from tests.helpers import make_deliveries, update_delivery


def indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'notifications'"
        )
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_one_claim_index_serves_every_lane_and_the_lane_split_is_gone():
    found = indexes()
    assert found["deliveries_claim"].endswith(
        "(lane, next_attempt_at, created_at, id) WHERE ((status)::text = 'pending'::text)"
    )
    assert "deliveries_claim_real" not in found and "deliveries_claim_demo" not in found
    assert found["notifications_cancel_key"].endswith(
        "(cancel_key, user_id) WHERE (NOT ((cancel_key)::text = ''::text))"
    )
    assert found["deliveries_cancelled"].endswith(
        "(created_at DESC, id DESC) WHERE ((status)::text = 'cancelled'::text)"
    )


def test_the_status_check_knows_cancelled_and_nothing_made_up(db, user):
    [delivery_id] = make_deliveries(user, 1)
    update_delivery(delivery_id, "status = 'cancelled'")
    with pytest.raises(IntegrityError), transaction.atomic():
        update_delivery(delivery_id, "status = 'withdrawn'")


def test_new_columns_have_their_database_defaults(db, user):
    [delivery_id] = make_deliveries(user, 1)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.lane, d.throttles, n.cancel_key FROM notifications.notification_deliveries"
            " AS d JOIN notifications.notifications AS n ON n.id = d.notification_id"
            " WHERE d.id = %s",
            [delivery_id],
        )
        assert cursor.fetchone() == ("normal", 0, "")
        cursor.execute("SELECT count(*) FROM notifications.provider_rates")
        assert cursor.fetchone() == (0,)


def test_the_throttle_count_is_held_non_negative_by_a_validated_check(db, user):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT convalidated FROM pg_constraint"
            " WHERE conname = 'notification_deliveries_throttles_check'"
        )
        assert cursor.fetchone() == (True,)
    [delivery_id] = make_deliveries(user, 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        update_delivery(delivery_id, "throttles = -1")
