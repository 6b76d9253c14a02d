"""A provider's 429: the row goes back for later without spending a send, fenced like every
write, and dead once the provider has refused DELIVERY_MAX_THROTTLES times. Real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from notifications import outbox
from notifications.models import NotificationDelivery, Status
from notifications.outbox import Outcome
from tests.helpers import db_now, make_deliveries, mark_sent, update_delivery


def row(delivery_id: int) -> NotificationDelivery:
    return NotificationDelivery.objects.get(pk=delivery_id)


def throttle(claimed, **kwargs) -> bool:
    """Write a throttled outcome for claimed; return whether it landed."""
    outcome = Outcome.failure(
        claimed, code="HTTP_429", message="slow down", retryable=True, throttled=True, **kwargs
    )
    return outbox.write_outcomes([outcome]) == {claimed.id}


def test_a_throttled_send_waits_its_retry_after_and_spends_no_send(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert throttle(claimed, retry_after=timedelta(seconds=90))
    stored = row(delivery_id)
    assert stored.status == Status.PENDING
    assert (stored.attempts, stored.attempt_base, stored.throttles) == (1, 1, 1)
    assert stored.next_attempt_at - db_now() == timedelta(seconds=90)
    assert stored.error_code == "THROTTLED"
    # Read as pending, not retrying: nothing failed under the budget.
    assert stored.shown_status == "pending"


def test_a_throttled_send_without_retry_after_waits_thirty_seconds(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert throttle(claimed)
    assert row(delivery_id).next_attempt_at - db_now() == timedelta(seconds=30)


def test_throttles_leave_the_attempts_budget_untouched(db, user, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 2
    [delivery_id] = make_deliveries(user, 1)
    for _ in range(5):  # more 429s than the budget has sends
        update_delivery(delivery_id, "next_attempt_at = now()")
        [claimed] = outbox.claim(batch_size=1)
        assert claimed.sends == 1  # each claim is the first send of the budget
        assert throttle(claimed)
    stored = row(delivery_id)
    assert (stored.status, stored.attempts, stored.attempt_base, stored.throttles) == (
        Status.PENDING,
        5,
        5,
        5,
    )
    update_delivery(delivery_id, "next_attempt_at = now()")
    [claimed] = outbox.claim(batch_size=1)
    assert claimed.throttles == 5
    assert mark_sent(claimed, provider_message_id="at-last")


def test_the_last_allowed_throttle_makes_the_row_dead_saying_how_many(db, user, settings):
    settings.DELIVERY_MAX_THROTTLES = 3
    [delivery_id] = make_deliveries(user, 1)
    update_delivery(delivery_id, "throttles = 2")
    [claimed] = outbox.claim(batch_size=1)
    assert throttle(claimed)
    stored = row(delivery_id)
    assert (stored.status, stored.throttles, stored.error_code) == (Status.DEAD, 3, "THROTTLED")
    assert "3 sends" in stored.error_message and "429" in stored.error_message
    # A staff Retry starts both counts again.
    assert outbox.retry(delivery_id=delivery_id)
    assert row(delivery_id).throttles == 0


def test_a_stale_workers_throttle_is_fenced_off(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [first] = outbox.claim(batch_size=1)
    update_delivery(delivery_id, "attempted_at = now() - interval '1 hour'")
    outbox.reclaim_stale(lease=timedelta(minutes=5))
    [second] = outbox.claim(batch_size=1)
    assert not throttle(first)
    stored = row(delivery_id)
    assert (stored.status, stored.attempt_base, stored.throttles) == (Status.PROCESSING, 0, 0)
    assert throttle(second)


def test_a_throttle_after_a_staff_retry_of_the_same_claim_is_fenced_off(db, user):
    # The reaper gave up on the row, staff retried it (attempt_base = attempts): the old
    # claim's 429 must not give back a send the budget no longer counts.
    [delivery_id] = make_deliveries(user, 1)
    update_delivery(delivery_id, "attempts = 4")
    [claimed] = outbox.claim(batch_size=1)
    update_delivery(delivery_id, "attempted_at = now() - interval '1 hour'")
    assert outbox.reclaim_stale(lease=timedelta(minutes=5)).dead == [delivery_id]
    assert outbox.retry(delivery_id=delivery_id)
    assert not throttle(claimed)
    stored = row(delivery_id)
    assert (stored.status, stored.attempts, stored.attempt_base) == (Status.PENDING, 5, 5)


def test_a_release_with_a_delay_hands_the_row_back_for_later_unspent(db, user):
    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    assert outbox.release([claimed], delay=12.5) == {delivery_id}
    stored = row(delivery_id)
    assert (stored.status, stored.attempts - stored.attempt_base) == (Status.PENDING, 0)
    assert stored.next_attempt_at - db_now() == timedelta(seconds=12.5)
    assert outbox.claim(batch_size=1) == []


def test_a_release_takes_its_delay_as_a_timedelta_too_and_refuses_a_negative_one(db, user):
    import pytest

    [delivery_id] = make_deliveries(user, 1)
    [claimed] = outbox.claim(batch_size=1)
    with pytest.raises(ValueError):
        outbox.release([claimed], delay=-1)
    assert outbox.release([claimed], delay=timedelta(minutes=2)) == {delivery_id}
    assert row(delivery_id).next_attempt_at - db_now() == timedelta(minutes=2)
