"""The queue's invariants, each on real PostgreSQL."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection, transaction

from notifications import outbox, stats
from notifications.lanes import Lane
from notifications.models import NotificationDelivery, Status
from tests.helpers import db_now, execute, make_deliveries, mark_failed, mark_sent, update_delivery


def row(delivery_id: int) -> NotificationDelivery:
    return NotificationDelivery.objects.get(pk=delivery_id)


# --- The claim --------------------------------------------------------------------------------


def test_claim_marks_rows_processing_bumps_attempts_and_stamps_the_database_clock(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=10)
    assert (claimed.id, claimed.attempts, claimed.channel) == (delivery_id, 1, "recording")
    assert claimed.message_key == "test.note"
    assert claimed.user_id == user.pk
    stored = row(delivery_id)
    assert stored.status == Status.PROCESSING
    assert stored.attempts == 1
    assert stored.attempted_at == db_now()


def test_a_claim_is_a_state_transition_so_a_second_claim_gets_nothing(db, user):
    make_deliveries(user, 3)
    assert len(outbox.claim(batch_size=10)) == 3
    assert outbox.claim(batch_size=10) == []


def test_the_claim_returns_the_fields_of_a_claimed_delivery_in_their_order(db, user):
    # claim() maps each row onto ClaimedDelivery by position.
    make_deliveries(user, 1)
    with connection.cursor() as cursor:
        cursor.execute(outbox.CLAIM_SQL, {"batch_size": 1})
        assert [c.name for c in cursor.description] == outbox.CLAIMED_FIELDS


def test_claim_takes_at_most_the_batch_in_queue_order(db, user):
    ids = make_deliveries(user, 5)
    # The oldest next_attempt_at first; equal times fall back to created_at, then id.
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now() - %s * "
        "interval '1 second' WHERE id = %s",
        [10, ids[3]],
    )
    claimed = outbox.claim(batch_size=3)
    # UPDATE … RETURNING gives no order of its own; what matters is which rows were taken.
    assert {c.id for c in claimed} == {ids[3], ids[0], ids[1]}


def test_a_row_whose_backoff_has_not_elapsed_is_not_claimed(db, user):
    [waiting, due] = make_deliveries(user, 2)
    update_delivery(waiting, "next_attempt_at = now() + interval '1 second'")
    assert [c.id for c in outbox.claim(batch_size=10)] == [due]


def test_the_claim_sql_is_literal_schema_qualified_and_quotes_its_aliases():
    sql = outbox.CLAIM_SQL
    assert "FOR UPDATE SKIP LOCKED" in sql
    assert "AS MATERIALIZED" in sql
    assert "ORDER BY next_attempt_at, created_at, id" in sql
    tables = re.findall(r"\b(?:FROM|UPDATE)\s+([a-z_][\w.]*)", sql)
    assert tables == [
        *["notifications.notification_deliveries"] * len(outbox.LANES),  # one CTE per lane
        "notifications.notification_deliveries",  # the UPDATE
        "notifications.notifications",  # its FROM
        "claimable",  # the ids it updates
        "notifications.choices_versions",  # whose choices changed since (rechoose)
    ]
    # The lanes' CTEs are quoted, the lane names literals, one CTE per lane in rank order.
    ctes = re.findall(r'^(?:WITH )?"(lane_\d+)" AS MATERIALIZED \(  -- (\S+)$', sql, re.MULTILINE)
    assert ctes == [(f"lane_{i}", lane.name) for i, lane in enumerate(outbox.LANES)]
    assert [f"lane = '{lane.name}'" in sql for lane in outbox.LANES] == [True] * len(ctes)
    assert "d.id = ANY(ARRAY(SELECT id FROM claimable))" in sql
    returning = sql.split("RETURNING", 1)[1]
    aliases = re.findall(r"\bAS\s+(\S+)", returning)
    assert len(aliases) == len(outbox.CLAIMED_FIELDS) == 13
    assert all(a.strip(",").startswith('"') and a.strip(",").endswith('"') for a in aliases)


def test_claim_skips_rows_locked_by_another_connection_without_waiting(other_connection, user):
    ids = make_deliveries(user, 4)
    with other_connection.transaction():
        other_connection.execute(
            "SELECT id FROM notifications.notification_deliveries WHERE id = ANY(%s) FOR UPDATE",
            [ids[:2]],
        )
        # Were the claim to wait for those locks, this would fail instead of hanging.
        execute("SET statement_timeout = '5s'")
        try:
            claimed = outbox.claim(batch_size=4)
        finally:
            execute("SET statement_timeout = 0")
        # Fewer rows than asked: LIMIT applies before SKIP LOCKED skips.
        assert sorted(c.id for c in claimed) == ids[2:]
    assert sorted(c.id for c in outbox.claim(batch_size=4)) == ids[:2]


# A naive claim: LIMIT inside `IN (subquery)`. The planner may run the subquery again for
# every outer row, and rows this very statement has already updated are skipped by the rerun.
NAIVE_CLAIM_SQL = """
UPDATE notifications.notification_deliveries
SET status = 'processing', attempts = attempts + 1, attempted_at = now()
WHERE id IN (
    SELECT id FROM notifications.notification_deliveries
    WHERE status = 'pending' AND lane = 'normal' AND next_attempt_at <= now()
    ORDER BY next_attempt_at, created_at, id
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id
"""

# Plans a planner may pick on its own with other statistics, forced here: nested loops only,
# no hashing, no materialising, and no sorting (so the claim index supplies the order and an
# inner index scan is cheap to rerun). The last set also takes the index away.
_NESTED_LOOPS = [
    "SET LOCAL enable_hashjoin = off",
    "SET LOCAL enable_mergejoin = off",
    "SET LOCAL enable_hashagg = off",
    "SET LOCAL enable_material = off",
    "SET LOCAL enable_bitmapscan = off",
]
ADVERSARIAL_PLANS = [
    _NESTED_LOOPS + ["SET LOCAL enable_sort = off"],
    _NESTED_LOOPS + ["SET LOCAL enable_sort = off", "SET LOCAL enable_seqscan = off"],
    _NESTED_LOOPS + ["SET LOCAL enable_sort = off", "SET LOCAL enable_indexscan = off"],
    _NESTED_LOOPS,
]


def claimed_under(plan: list[str], sql: str, *, batch_size: int) -> int:
    with transaction.atomic():
        for setting in plan:
            execute(setting)
        with connection.cursor() as cursor:
            cursor.execute(sql, {"batch_size": batch_size})
            count = len(cursor.fetchall())
        transaction.set_rollback(True)
    return count


def test_claim_never_takes_more_than_asked_under_adversarial_plans(db, user):
    # Stale statistics: the planner believes the table holds 5 rows when it holds 400.
    make_deliveries(user, 5)
    execute("ANALYZE notifications.notification_deliveries")
    make_deliveries(user, 395)

    naive = [claimed_under(plan, NAIVE_CLAIM_SQL, batch_size=10) for plan in ADVERSARIAL_PLANS]
    assert max(naive) > 10, "the naive claim should overshoot here, or this test proves nothing"

    for _ in range(5):
        for plan in ADVERSARIAL_PLANS:
            assert claimed_under(plan, outbox.CLAIM_SQL, batch_size=10) == 10
    assert len(outbox.claim(batch_size=10)) == 10


# --- Lanes -------------------------------------------------------------------------------------


def on_lane(ids: list[int], lane: str) -> list[int]:
    execute(
        "UPDATE notifications.notification_deliveries SET lane = %s WHERE id = ANY(%s)",
        [lane, ids],
    )
    return ids


def claimed_lanes(lanes: list[Lane], *, batch_size: int) -> list[str]:
    """Claim with the statement built for lanes; return the claimed rows' lanes."""
    with connection.cursor() as cursor:
        cursor.execute(outbox.claim_sql(lanes), {"batch_size": batch_size})
        return [row[outbox.CLAIMED_FIELDS.index("lane")] for row in cursor.fetchall()]


@pytest.mark.showcase
def test_the_queue_has_no_demo_special_case_but_its_lane(settings):
    from showcases import queue_demo
    from showcases.channel import DEMO_CHANNEL

    # The claim and the counts name lanes, never the demo channel; the demo's own prune does.
    for sql in (outbox.CLAIM_SQL, stats.QUEUE_DEPTH_SQL):
        assert not re.search(r"channel\s*(=|<>)", sql)
    assert f"channel = '{DEMO_CHANNEL}'" in queue_demo.PRUNE_DEMO_SQL
    assert "showcases" in settings.INSTALLED_APPS
    assert outbox.LANES[-1] == Lane("demo", 3, 16)
    assert "LIMIT least(16, %(batch_size)s - " in outbox.CLAIM_SQL


def test_higher_lanes_are_claimed_before_lower_rows_queued_ahead_of_them(db, user):
    low = on_lane(make_deliveries(user, 50), "low")
    normal = make_deliveries(user, 3)
    high = on_lane(make_deliveries(user, 2), "high")
    claimed = outbox.claim(batch_size=10)
    ids = {c.id for c in claimed}
    assert set(high) | set(normal) <= ids
    assert len(ids) == 10  # 2 high, 3 normal, then the 5 oldest low rows
    assert sorted(ids - set(high) - set(normal)) == low[:5]
    assert {c.id: c.lane for c in claimed if c.id in high} == dict.fromkeys(high, "high")


@pytest.mark.showcase
def test_the_demo_lane_takes_at_most_its_cap(db, user):
    demo = on_lane(make_deliveries(user, 40, channel="demo"), "demo")
    claimed = outbox.claim(batch_size=25)
    assert sorted(c.id for c in claimed) == demo[:16]
    assert outbox.more_due(claimed, batch_size=25)  # the cap was hit: more may be due


@pytest.mark.parametrize(
    ("lanes", "queued", "batch", "claimed"),
    [
        # A capped lower lane only fills what the batch has left: 5 - 3 = 2.
        ([Lane("normal", 0), Lane("demo", 1, 4)], {"normal": 3, "demo": 10}, 5, [3, 2]),
        # A batch full of a higher lane's rows leaves no room at all.
        ([Lane("normal", 0), Lane("demo", 1, 4)], {"normal": 8, "demo": 10}, 5, [5, 0]),
        # Alone, a capped lane takes its cap, no more.
        ([Lane("normal", 0), Lane("demo", 1, 4)], {"normal": 0, "demo": 10}, 5, [0, 4]),
        # An uncapped lane takes what fits.
        ([Lane("normal", 0), Lane("low", 1)], {"normal": 0, "low": 10}, 3, [0, 3]),
        # A capped higher lane leaves the rest of the batch to the next lanes.
        (
            [Lane("high", 0, 2), Lane("normal", 1), Lane("low", 2)],
            {"high": 5, "normal": 2, "low": 5},
            6,
            [2, 2, 2],
        ),
    ],
)
def test_each_lane_takes_at_most_its_cap_of_what_the_lanes_above_it_left(
    db, user, lanes, queued, batch, claimed
):
    for lane, count in queued.items():
        on_lane(make_deliveries(user, count), lane)
    found = claimed_lanes(lanes, batch_size=batch)
    assert [found.count(lane.name) for lane in lanes] == claimed


def test_a_claim_statement_for_invalid_lanes_is_refused():
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured):
        outbox.claim_sql([Lane("normal", 0), Lane("x'; DROP TABLE x; --", 1)])


@pytest.mark.showcase
def test_more_are_due_when_the_batch_is_full_or_a_capped_lane_took_its_cap(db, user):
    make_deliveries(user, 3)
    assert not outbox.more_due(outbox.claim(batch_size=10), batch_size=10)
    make_deliveries(user, 10)
    assert outbox.more_due(outbox.claim(batch_size=10), batch_size=10)
    on_lane(make_deliveries(user, 15, channel="demo"), "demo")
    assert not outbox.more_due(outbox.claim(batch_size=25), batch_size=25)  # 15 < its cap


def test_every_lane_of_the_claim_reads_the_claim_index(db, user):
    for lane in outbox.LANES:
        on_lane(make_deliveries(user, 5), lane.name)
    execute("ANALYZE notifications.notification_deliveries")
    with transaction.atomic():
        # What the planner may choose on a tiny table is its business; what matters is that
        # each lane's WHERE matches the index's predicate and leading column, so it can be used.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            execute(f"SET LOCAL {setting} = off")
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + outbox.CLAIM_SQL, {"batch_size": 10})
            plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    assert plan.count("using deliveries_claim on") == len(outbox.LANES)
    assert plan.count("Index Cond: (((lane)::text = ") == len(outbox.LANES)


# --- The fence --------------------------------------------------------------------------------


def outlive_lease(delivery_id: int) -> None:
    """Let the worker holding delivery_id stall past its lease, and the reaper requeue it."""
    update_delivery(delivery_id, "attempted_at = now() - interval '1 hour'")
    assert len(outbox.reclaim_stale(lease=timedelta(minutes=5))) == 1


def test_a_stale_workers_late_write_is_fenced_off(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [first] = outbox.claim(batch_size=1)
    # The first worker stalls past its lease; the reaper requeues the row, a second claims it.
    outlive_lease(delivery_id)
    [second] = outbox.claim(batch_size=1)
    assert second.attempts == first.attempts + 1

    assert mark_sent(first, provider_message_id="late") is False
    assert mark_failed(first, code="X", message="late", retryable=False) is False
    stored = row(delivery_id)
    assert (stored.status, stored.attempts, stored.provider_message_id) == (
        Status.PROCESSING,
        2,
        "",
    )

    assert mark_sent(second, provider_message_id="on-time") is True
    assert row(delivery_id).status == Status.SENT


def test_a_success_reported_after_a_reap_but_before_a_reclaim_still_lands(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    outlive_lease(delivery_id)
    assert row(delivery_id).status == Status.PENDING

    assert mark_sent(claimed, provider_message_id="m-1") is True
    stored = row(delivery_id)
    assert (stored.status, stored.provider_message_id, stored.error_code) == (
        Status.SENT,
        "m-1",
        "",
    )
    assert outbox.claim(batch_size=1) == []  # so it is not sent a second time


def test_a_success_reported_after_a_reap_and_a_cancel_still_lands_but_a_failure_does_not(db, user):
    first, second = make_deliveries(user, 2)
    claims = sorted(outbox.claim(batch_size=2), key=lambda c: c.id)
    outlive_lease(first)
    outlive_lease(second)
    assert outbox.cancel([first, second]) == {first, second}
    late = [
        outbox.Outcome.sent(claims[0], provider_message_id="m-1"),
        outbox.Outcome.failure(claims[1], code="HTTP_503", message="m", retryable=True),
    ]
    # The message went out after all: the row says sent. A failure changes nothing.
    assert outbox.write_outcomes(late) == {first}
    assert (row(first).status, row(first).provider_message_id) == (Status.SENT, "m-1")
    assert row(second).status == Status.CANCELLED


def test_a_stale_workers_release_leaves_the_new_claim_alone(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [first] = outbox.claim(batch_size=1)
    # The first worker stalls past its lease, a second claims the row and is sending it...
    outlive_lease(delivery_id)
    [second] = outbox.claim(batch_size=1)
    before = row(delivery_id)
    # ...when the first runs out of time and hands back the row it no longer holds.
    assert outbox.release([first]) == set()
    after = row(delivery_id)
    assert (after.status, after.attempts, after.attempt_base, after.next_attempt_at) == (
        Status.PROCESSING,
        second.attempts,
        before.attempt_base,
        before.next_attempt_at,
    )
    assert outbox.claim(batch_size=1) == []  # nobody else is handed the row meanwhile
    assert mark_sent(second, provider_message_id="on-time") is True


def test_a_release_after_the_outcome_landed_changes_nothing(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert mark_sent(claimed, provider_message_id="m-1")
    assert outbox.release([claimed]) == set()
    stored = row(delivery_id)
    assert (stored.status, stored.attempt_base) == (Status.SENT, 0)


def test_a_release_puts_its_own_claim_back_due_now_without_counting_the_send(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert outbox.release([claimed]) == {delivery_id}
    stored = row(delivery_id)
    assert (stored.status, stored.attempts - stored.attempt_base) == (Status.PENDING, 0)
    assert stored.next_attempt_at <= db_now()
    [again] = outbox.claim(batch_size=1)
    assert again.attempts == claimed.attempts + 1  # a fence value nobody held before


def test_a_terminal_row_cannot_be_rewritten(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert mark_failed(claimed, code="BAD_ADDRESS", message="no", retryable=False)
    assert mark_sent(claimed, provider_message_id="after") is False
    assert row(delivery_id).status == Status.FAILED


# --- Outcomes ---------------------------------------------------------------------------------


def test_a_send_records_sent_at_and_the_provider_id_from_the_database_clock(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert mark_sent(claimed, provider_message_id="<abc@x>")
    stored = row(delivery_id)
    assert stored.sent_at == db_now()
    assert stored.provider_message_id == "<abc@x>"


def test_a_retryable_failure_waits_its_backoff_on_the_database_clock(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert mark_failed(claimed, code="UPSTREAM_503", message="down", retryable=True)
    stored = row(delivery_id)
    assert stored.status == Status.PENDING
    assert (stored.error_code, stored.error_message) == ("UPSTREAM_503", "down")
    wait = stored.next_attempt_at - db_now()
    # First step 30 s, ±15 %: between 25.5 s and 34.5 s.
    assert timedelta(seconds=25.5) <= wait <= timedelta(seconds=34.5)
    assert NotificationDelivery.objects.retrying().filter(pk=delivery_id).exists()
    assert not NotificationDelivery.objects.due().filter(pk=delivery_id).exists()


def test_a_permanent_failure_is_failed_and_a_spent_budget_is_dead(db, user):
    [rejected, spent] = make_deliveries(user, 2)
    update_delivery(spent, "attempts = 4")
    claims = {c.id: c for c in outbox.claim(batch_size=2)}
    assert claims[spent].sends == 5
    mark_failed(claims[rejected], code="BAD_ADDRESS", message="x", retryable=False)
    mark_failed(claims[spent], code="UPSTREAM_503", message="x", retryable=True)
    assert row(rejected).status == Status.FAILED
    assert row(spent).status == Status.DEAD
    assert list(NotificationDelivery.objects.needs_attention().values_list("pk", flat=True)) == [
        spent
    ]


def test_outcomes_are_written_in_one_statement_with_a_fence_per_row(
    db, user, django_assert_num_queries
):
    ids = make_deliveries(user, 3)
    claims = sorted(outbox.claim(batch_size=3), key=lambda c: c.id)
    stale = outbox.Outcome.sent(claims[2], provider_message_id="stale")
    stale = outbox.Outcome(stale.delivery_id, stale.attempts - 1, stale.status)
    outcomes = [
        outbox.Outcome.sent(claims[0], provider_message_id="a"),
        outbox.Outcome.failure(claims[1], code="UPSTREAM_503", message="m", retryable=True),
        stale,
    ]
    with django_assert_num_queries(1):
        landed = outbox.write_outcomes(outcomes)
    assert landed == {claims[0].id, claims[1].id}
    assert [row(i).status for i in ids] == [Status.SENT, Status.PENDING, Status.PROCESSING]


# --- The reaper -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held_for", "reaped"),
    [
        (timedelta(seconds=299), False),  # lease 300 s − 1 s: still within the lease
        (timedelta(seconds=301), True),  # lease 300 s + 1 s: expired
    ],
)
def test_the_reaper_takes_back_rows_held_past_the_lease_only(db, user, held_for, reaped):
    [delivery_id] = make_deliveries(user, 1)
    outbox.claim(batch_size=1)
    execute(
        "UPDATE notifications.notification_deliveries "
        "SET attempted_at = now() - make_interval(secs => %s) WHERE id = %s",
        [held_for.total_seconds(), delivery_id],
    )
    result = outbox.reclaim_stale(lease=timedelta(seconds=300))
    stored = row(delivery_id)
    if reaped:
        assert result.requeued == [delivery_id]
        assert (stored.status, stored.error_code) == (Status.PENDING, "CLAIM_EXPIRED")
        assert stored.next_attempt_at == db_now()
    else:
        assert len(result) == 0
        assert stored.status == Status.PROCESSING
    assert stored.attempts == 1  # the reaper never bumps attempts


def test_the_reaper_dead_letters_a_row_whose_budget_is_spent(db, user):
    [delivery_id] = make_deliveries(user, 1)
    update_delivery(delivery_id, "attempts = 4")
    outbox.claim(batch_size=1)
    update_delivery(delivery_id, "attempted_at = now() - interval '1 hour'")
    assert outbox.reclaim_stale(lease=timedelta(minutes=5)).dead == [delivery_id]
    stored = row(delivery_id)
    assert (stored.status, stored.attempts) == (Status.DEAD, 5)


# --- Staff retry ------------------------------------------------------------------------------


def kill(delivery_id: int) -> outbox.ClaimedDelivery:
    update_delivery(delivery_id, "attempts = 4")
    [claimed] = outbox.claim(batch_size=1)
    mark_failed(claimed, code="UPSTREAM_503", message="x", retryable=True)
    assert row(delivery_id).status == Status.DEAD
    return claimed


def test_retry_requeues_a_dead_row_now_with_a_fresh_budget_and_new_fence_values(db, user):
    [delivery_id] = make_deliveries(user, 1)
    last_claim = kill(delivery_id)

    assert outbox.retry(delivery_id=delivery_id) is True
    stored = row(delivery_id)
    assert stored.status == Status.PENDING
    assert stored.next_attempt_at == db_now()
    assert (stored.attempts, stored.attempt_base) == (5, 5)

    [fresh] = outbox.claim(batch_size=1)
    assert fresh.attempts == 6  # never a value an earlier worker held
    assert fresh.sends == 1  # the budget starts again
    assert mark_sent(last_claim, provider_message_id="ghost") is False
    assert mark_sent(fresh, provider_message_id="ok") is True


def test_retry_leaves_failed_rows_alone_unless_asked_and_refuses_other_states(db, user):
    [failed, sent] = make_deliveries(user, 2)
    claims = {c.id: c for c in outbox.claim(batch_size=2)}
    mark_failed(claims[failed], code="BAD_ADDRESS", message="x", retryable=False)
    mark_sent(claims[sent], provider_message_id="m")

    assert outbox.retry(delivery_id=failed) is False
    assert row(failed).status == Status.FAILED
    assert outbox.retry(delivery_id=failed, include_failed=True) is True
    assert row(failed).status == Status.PENDING
    assert outbox.retry(delivery_id=sent, include_failed=True) is False
    assert outbox.retry(delivery_id=10**12) is False


def test_a_nul_in_a_providers_error_is_stored_replaced_not_failing_the_flush(db, user):
    # A NUL cannot be stored in a text column: written as it came, it failed the whole
    # flush, which the drain then kept and tried again every batch.
    ids = make_deliveries(user, 2)
    claims = sorted(outbox.claim(batch_size=2), key=lambda c: c.id)
    outcomes = [
        outbox.Outcome.failure(claims[0], code="HTTP_500", message="bad\x00body", retryable=True),
        outbox.Outcome.sent(claims[1], provider_message_id="id\x00"),
    ]
    assert outbox.write_outcomes(outcomes) == set(ids)
    assert row(ids[0]).error_message == "bad\ufffdbody"
    assert row(ids[1]).provider_message_id == "id\ufffd"
