"""One meaning of "pending" and "retrying", read the same everywhere a person sees a row."""

from __future__ import annotations

import pytest
from django.db import connection

from notifications import outbox, stats
from notifications.models import (
    RETRYING,
    RETRYING_SQL,
    WAITING,
    WAITING_SQL,
    NotificationDelivery,
    ShownStatus,
)
from tests.helpers import execute, make_deliveries, mark_failed

DELIVERIES = "/admin/notifications/notificationdelivery/"


@pytest.fixture
def rows(user):
    """One row of each kind of pending, by how it got there."""
    # The claim takes the oldest first: the first three fail, the fourth is never claimed.
    waiting_out, due_again, retried, fresh = make_deliveries(user, 4)
    claims = {c.id: c for c in outbox.claim(batch_size=3)}
    for failed in (waiting_out, due_again, retried):
        mark_failed(claims[failed], code="UPSTREAM_503", message="x", retryable=True)
    # due_again's backoff has run out: it waits only for the next claim.
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now() WHERE id = %s",
        [due_again],
    )
    # retried failed a few times and died; a staff member pressed Retry.
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'dead' WHERE id = %s",
        [retried],
    )
    assert outbox.retry(delivery_id=retried)
    return {"fresh": fresh, "waiting_out": waiting_out, "due_again": due_again, "retried": retried}


EXPECTED = {
    "fresh": ShownStatus.PENDING,
    # Failed under its current budget: retrying, during its backoff and after it alike.
    "waiting_out": ShownStatus.RETRYING,
    "due_again": ShownStatus.RETRYING,
    # A staff Retry starts a fresh budget: it has not failed under this one.
    "retried": ShownStatus.PENDING,
}


def test_each_row_reads_one_state_in_the_badge_the_filter_the_tiles_and_the_dashboard(
    db, rows, admin_client, client
):
    by_state = {
        state: {rows[name] for name, s in EXPECTED.items() if s == state}
        for state in EXPECTED.values()
    }
    # The row itself (the admin badge, the page's feed).
    for name, state in EXPECTED.items():
        assert NotificationDelivery.objects.get(pk=rows[name]).shown_status == state, name
    # The queryset, and the admin's status filter through it.
    for state, ids in by_state.items():
        assert set(NotificationDelivery.objects.shown(state).values_list("pk", flat=True)) == ids
        listed = admin_client.get(f"{DELIVERIES}?status={state.value}").context["cl"].result_list
        assert {d.pk for d in listed} == ids
        assert all(d.shown_status == state for d in listed)
    # The tiles: the public page's and the admin dashboard's counts.
    for limit in (None, 1000):
        depth = stats.queue_depth(limit=limit)
        assert (depth.pending, depth.retrying) == (2, 2)
    page = client.get("/showcases/workers/queue/", HTTP_HX_REQUEST="true").content.decode()
    assert '<dd data-depth="pending">2</dd>' in page
    assert '<dd data-depth="retrying">2</dd>' in page
    # The dashboard's chart and channel health, over the last 24 hours of attempts.
    this_hour = stats.hourly()[-1]
    assert this_hour.counts[ShownStatus.RETRYING] == 2
    [health] = [h for h in stats.channel_health() if h.channel == "recording"]
    assert health.system_failures == 2


def test_the_q_and_the_sql_of_each_state_select_the_same_rows(db, rows):
    for q, sql in ((RETRYING, RETRYING_SQL), (WAITING, WAITING_SQL)):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM notifications.notification_deliveries WHERE {sql}")
            from_sql = {row[0] for row in cursor.fetchall()}
        assert from_sql == set(NotificationDelivery.objects.filter(q).values_list("pk", flat=True))
        assert from_sql  # the fixture has rows of both
