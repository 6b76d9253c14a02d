"""Retention beside digests: a notification that is an item of a carrier is never pruned from
under it, a carrier is pruned like any finished row (its items with it), and throttle counts
go a day after their window. Real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from notifications import digests, retention
from notifications.enqueue import send_notification
from notifications.models import (
    DigestItem,
    Notification,
    NotificationDelivery,
    Status,
    ThrottleCount,
)
from recipients.models import Cadence, DigestChoice
from tests.helpers import execute, update_delivery

pytestmark = pytest.mark.django_db


def policy(**changes) -> retention.RetentionPolicy:
    return retention.RetentionPolicy(
        **{
            "keep_sent": timedelta(days=30),
            "keep_finished": timedelta(days=90),
            "pause": 0,
            **changes,
        }
    )


@pytest.fixture
def reader(user):
    DigestChoice.objects.create(user=user, category="account", cadence=Cadence.DAILY, hour=9)
    return user


def welcome(user, name: str, channels=("email",)):
    return send_notification(
        user=user, type="welcome", params={"name": name}, channels=list(channels)
    )


def age_notifications(ids, *, days: int) -> None:
    execute(
        "UPDATE notifications.notifications SET created_at = now() - make_interval(days => %s)"
        " WHERE id = ANY(%s)",
        [days, list(ids)],
    )


def age_deliveries(ids, *, days: int) -> None:
    execute(
        "UPDATE notifications.notification_deliveries"
        " SET created_at = now() - make_interval(days => %s) WHERE id = ANY(%s)",
        [days, list(ids)],
    )


def carrier_of(result) -> NotificationDelivery:
    return NotificationDelivery.objects.get(pk=result.digested["email"])


def finished_carrier(user, *, events: int, state: str, days: int, event_days: int):
    """A digest carrier of `events` welcome messages, put in a finished state (SQL
    assignments) days old, its events and its own notification event_days old: the carrier
    and its events' notification ids."""
    results = [welcome(user, f"n{n}") for n in range(events)]
    carrier = carrier_of(results[0])
    update_delivery(carrier.pk, state)
    ids = [r.notification.pk for r in results]
    age_deliveries([carrier.pk], days=days)
    age_notifications([*ids, carrier.notification_id], days=event_days)
    return carrier, ids


def test_an_item_of_an_open_carrier_is_not_swept_however_old(reader):
    events = [welcome(reader, f"n{n}") for n in range(3)]
    carrier = carrier_of(events[0])
    # The events have no delivery of their own: only their items in the carrier.
    ids = [e.notification.pk for e in events]
    assert not NotificationDelivery.objects.filter(notification_id__in=ids).exists()
    age_notifications(ids, days=400)

    assert retention.due(policy())["empty_notifications"] == 0
    pruned = retention.prune(policy())
    assert pruned.complete and pruned.notifications == 0
    assert Notification.objects.filter(pk__in=ids).count() == 3
    assert DigestItem.objects.filter(carrier=carrier).count() == 3


def test_pruning_an_items_own_skipped_row_leaves_it_in_its_digest(reader):
    # No Telegram address: the event's telegram row is written as skipped, its email joins
    # the digest. The skipped row is pruned after 30 days; the event must stay an item.
    event = welcome(reader, "kept", channels=["email", "telegram"])
    assert event.skipped == {"telegram": "no_address"}
    [skipped] = NotificationDelivery.objects.filter(notification=event.notification)
    age_deliveries([skipped.pk], days=31)
    age_notifications([event.notification.pk], days=31)

    pruned = retention.prune(policy())
    assert pruned.skipped_deliveries == 1
    assert pruned.notifications == 0
    assert Notification.objects.filter(pk=event.notification.pk).exists()
    assert DigestItem.objects.filter(
        carrier_id=event.digested["email"], notification=event.notification
    ).exists()


def test_a_sent_carrier_is_pruned_with_its_items_and_its_events_are_swept_later(reader):
    _, ids = finished_carrier(
        reader, events=3, state="status = 'sent', sent_at = now()", days=31, event_days=31
    )

    first = retention.prune(policy())
    assert first.sent == 1
    # The carrier's notification went with its only delivery; its items with the delivery.
    assert first.notifications == 1
    assert not Notification.objects.filter(type=digests.DIGEST).exists()
    assert not DigestItem.objects.exists()
    # The events are notifications without a delivery now, swept at the finished horizon.
    assert Notification.objects.filter(pk__in=ids).count() == 3
    age_notifications(ids, days=91)
    assert retention.due(policy())["empty_notifications"] == 3
    assert retention.prune(policy()).notifications == 3
    assert not Notification.objects.exists()


def test_a_dead_carrier_keeps_its_items_until_the_finished_horizon(reader):
    carrier, ids = finished_carrier(
        reader, events=2, state="status = 'dead', attempts = 4", days=60, event_days=100
    )

    retention.prune(policy())
    # Past the sent horizon but not the finished one: a staff member may still retry it, and
    # every item is there to be sent.
    assert NotificationDelivery.objects.get(pk=carrier.pk).status == Status.DEAD
    assert DigestItem.objects.filter(carrier=carrier).count() == 2

    age_deliveries([carrier.pk], days=91)
    pruned = retention.prune(policy())
    assert pruned.finished == 1
    assert not DigestItem.objects.exists()
    # In the same run: the carrier's notification with it, then the events, now empty.
    assert pruned.notifications == 3
    assert not Notification.objects.exists()


def test_throttle_counts_go_a_day_after_their_window_in_bounded_batches(user, django_user_model):
    other = django_user_model.objects.create_user("other")
    execute(
        "INSERT INTO notifications.throttle_counts (user_id, category, window_end, sent)"
        " SELECT %s, 'account', now() - make_interval(hours => 25 + n), 4"
        " FROM generate_series(1, 5) AS n",
        [user.pk],
    )
    execute(
        "INSERT INTO notifications.throttle_counts (user_id, category, window_end, sent) VALUES"
        " (%s, 'account', now() - interval '23 hours', 2),"
        " (%s, 'account', now() + interval '1 hour', 1)",
        [user.pk, other.pk],
    )
    assert retention.due(policy())["throttle_counts"] == 5

    pruned = retention.prune(policy(batch=2))
    assert pruned.throttle_counts == 5
    assert pruned.complete
    left = sorted(ThrottleCount.objects.values_list("sent", flat=True))
    assert left == [1, 2]
    assert retention.last_run().report["throttle_counts"] == 5


def test_a_run_out_of_time_leaves_throttle_counts_for_the_next(user):
    execute(
        "INSERT INTO notifications.throttle_counts (user_id, category, window_end, sent)"
        " SELECT %s, 'account', now() - make_interval(days => 2, hours => n), 1"
        " FROM generate_series(1, 3) AS n",
        [user.pk],
    )
    # A run with no time at all stops after its first batch of the sent walk.
    pruned = retention.prune(policy(max_seconds=0.0))
    assert not pruned.complete and pruned.throttle_counts == 0
    assert ThrottleCount.objects.count() == 3
    assert retention.prune(policy()).throttle_counts == 3
