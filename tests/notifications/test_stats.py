"""Counts per state, bounded or exact, on real PostgreSQL (channel health and the hourly
chart are in test_dashboard.py, beside the page that shows them)."""

from __future__ import annotations

from django.db import connection, transaction

from notifications import outbox, stats
from tests.helpers import execute, make_deliveries, mark_failed, mark_sent


def test_a_limited_queue_depth_stops_counting_at_the_limit_and_says_so(db, user):
    make_deliveries(user, 7)
    depth = stats.queue_depth(limit=5)
    assert (depth.pending, depth.due_now, depth.failed) == (5, 5, 0)
    assert depth.at_limit("pending") and depth.at_limit("due_now")
    assert not depth.at_limit("failed")
    assert not stats.queue_depth().at_limit("pending")
    assert stats.queue_depth().pending == 7


def test_a_limited_queue_depth_reads_only_indexes_at_any_table_size(db, user):
    make_deliveries(user, 5)
    make_deliveries(user, 5, channel="unwatched")
    execute("ANALYZE notifications.notification_deliveries")
    with transaction.atomic():
        # Forbidden, a sequential scan shows up only where no index could serve the count.
        execute("SET LOCAL enable_seqscan = off")
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + stats.QUEUE_DEPTH_SQL, {"limit": 1000})
            plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    assert "Seq Scan on notification_deliveries" not in plan
    # Every count stops at the limit: each state's, and each lane's due rows.
    assert plan.count("Limit") == len(stats.COUNTED) + len(outbox.LANES)


def test_a_limited_queue_depth_estimates_sent_from_the_statistics_of_a_large_table(
    db, user, monkeypatch
):
    make_deliveries(user, 40)
    for claimed in outbox.claim(batch_size=30):
        mark_sent(claimed, provider_message_id="m")
    execute("ANALYZE notifications.notification_deliveries")
    monkeypatch.setattr(stats, "EXACT_SENT_BELOW_ROWS", 0)
    # 30 of the 40 rows are sent; the pending count stopped at 5, so "the rest are sent"
    # would say 35: the statistics' share of 'sent' says 30.
    depth = stats.queue_depth(limit=5)
    assert (depth.sent, depth.sent_is_estimate, depth.pending) == (30, True, 5)
    assert stats.queue_depth().sent == 30


def test_queue_depth_counts_each_state_and_the_derived_ones(db, user):
    ids = make_deliveries(user, 7)
    # ids[6] is written off as enqueue writes an opt-out: skipped, never claimed.
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'skipped',"
        " skip_reason = 'opted_out' WHERE id = %s",
        [ids[6]],
    )
    claims = {c.id: c for c in outbox.claim(batch_size=4)}
    mark_sent(claims[ids[0]], provider_message_id="m")
    mark_failed(claims[ids[1]], code="BAD", message="x", retryable=False)
    mark_failed(claims[ids[2]], code="UPSTREAM_503", message="x", retryable=True)
    # ids[3] stays processing; ids[4] and ids[5] are pending and due; ids[2] is retrying, and
    # only that: pending and retrying are the two halves of the stored pending.
    depth = stats.queue_depth()
    assert depth.as_dict() == {
        "pending": 2,
        "due_now": 2,
        "retrying": 1,
        "processing": 1,
        "sent": 1,
        "failed": 1,
        "dead": 0,
        "cancelled": 0,
        "skipped": 1,
        "sent_is_estimate": False,
        "limit": None,
    }
    assert stats.skipped() == {("recording", "opted_out"): 1}


def test_due_now_counts_every_lane_and_cancelled_rows_are_counted_apart(db, user):
    ids = make_deliveries(user, 8)
    # Every configured lane, round and round (the showcase's too, when it is installed).
    lanes = [outbox.LANES[n % len(outbox.LANES)].name for n in range(8)]
    for delivery_id, lane in zip(ids, lanes, strict=True):
        execute(
            "UPDATE notifications.notification_deliveries SET lane = %s WHERE id = %s",
            [lane, delivery_id],
        )
    assert outbox.cancel(ids[-2:]) == set(ids[-2:])
    for limit in (None, 1000):
        depth = stats.queue_depth(limit=limit)
        assert (depth.due_now, depth.pending, depth.cancelled) == (6, 6, 2)
    assert stats.queue_depth(limit=4).due_now == 4
