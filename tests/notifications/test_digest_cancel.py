"""Cancelling a notification gathered into a digest: cancel_notifications(key=…) withdraws it
from a carrier no drain has claimed, cancels a carrier it leaves with nothing, and leaves a
claimed one as it is. Races with a join and a claim on a second connection, real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from notifications import digests, outbox
from notifications.enqueue import cancel_notifications, send_notification
from notifications.models import DigestItem, NotificationDelivery, Status
from recipients.models import Cadence, DigestChoice
from tests.helpers import execute, in_thread, mark_sent, poll

OPEN = [Status.PENDING, Status.PROCESSING]


@pytest.fixture
def reader(user):
    DigestChoice.objects.create(user=user, category="account", cadence=Cadence.HOURLY)
    return user


def welcome(user, name: str, key: str = ""):
    result = send_notification(
        user=user, type="welcome", params={"name": name}, channels=["email"], cancel_key=key
    )
    return result


def carrier_of(result) -> NotificationDelivery:
    return NotificationDelivery.objects.get(pk=result.digested["email"])


def make_due(carrier: NotificationDelivery) -> None:
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now() WHERE id = %s",
        [carrier.pk],
    )


def names_in(carrier: NotificationDelivery) -> list[str]:
    items = digests.items_of([carrier.pk]).get(carrier.pk)
    return [] if items is None else [item.params["name"] for item in items.newest]


def counts(result) -> tuple[int, int, int]:
    return (result.cancelled, result.in_flight, result.finished)


def waiting_for_a_lock() -> bool:
    """Whether a session of this test's database waits for a lock (the server is shared with
    other databases, whose sessions do not count)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid IN"
            " (SELECT pid FROM pg_stat_activity WHERE datname = current_database())"
        )
        return cursor.fetchone()[0] > 0


@pytest.mark.django_db
def test_a_cancelled_notification_leaves_an_open_digest_and_the_rest_stay(reader):
    first = welcome(reader, "one")
    welcome(reader, "two", key="order-7")
    welcome(reader, "three")
    carrier = carrier_of(first)

    assert counts(cancel_notifications(key="order-7")) == (1, 0, 0)
    assert names_in(carrier) == ["three", "one"]
    assert NotificationDelivery.objects.get(pk=carrier.pk).status == Status.PENDING
    # Nothing left to withdraw.
    assert counts(cancel_notifications(key="order-7")) == (0, 0, 0)


@pytest.mark.django_db
def test_a_digest_left_with_nothing_is_cancelled_with_it(reader):
    first = welcome(reader, "one", key="order-7")
    welcome(reader, "two", key="order-7")
    carrier = carrier_of(first)
    make_due(carrier)

    assert counts(cancel_notifications(key="order-7")) == (2, 0, 0)
    emptied = NotificationDelivery.objects.get(pk=carrier.pk)
    assert (emptied.status, emptied.error_code) == (Status.CANCELLED, "CANCELLED")
    assert not DigestItem.objects.exists()
    # No drain sends a digest of nothing, nor fails one as EMPTY_DIGEST.
    assert outbox.claim(batch_size=10) == []


@pytest.mark.django_db
def test_a_claimed_digest_keeps_the_notification_and_counts_it_in_flight(reader):
    first = welcome(reader, "one", key="order-7")
    carrier = carrier_of(first)
    make_due(carrier)
    [claimed] = outbox.claim(batch_size=10)

    assert counts(cancel_notifications(key="order-7")) == (0, 1, 0)
    assert names_in(carrier) == ["one"]
    # Once the digest is sent, the notification in it counts as finished.
    assert mark_sent(claimed, provider_message_id="m")
    assert counts(cancel_notifications(key="order-7")) == (0, 0, 1)


@pytest.mark.django_db
def test_only_the_given_users_notification_is_withdrawn(reader, django_user_model):
    other = django_user_model.objects.create_user("bea", email="bea@example.com")
    DigestChoice.objects.create(user=other, category="account", cadence=Cadence.HOURLY)
    mine = welcome(reader, "mine", key="k")
    theirs = welcome(other, "theirs", key="k")

    assert counts(cancel_notifications(key="k", user=other)) == (1, 0, 0)
    assert names_in(carrier_of(mine)) == ["mine"]
    assert NotificationDelivery.objects.get(pk=theirs.digested["email"]).status == (
        Status.CANCELLED
    )


def test_a_cancel_waits_for_a_join_under_way_and_keeps_what_it_added(other_connection, reader):
    """The join's item is committed after the cancel's first snapshot: judged from that one the
    carrier would look empty and be cancelled, and the joined notification lost with it."""
    first = welcome(reader, "cancelled", key="order-7")
    carrier = carrier_of(first)
    joining = uuid.uuid4()
    other_connection.execute("BEGIN")
    other_connection.execute(
        "INSERT INTO notifications.notifications (id, user_id, type, message_key,"
        " message_params, action_url, cancel_key)"
        " VALUES (%s, %s, 'welcome', 'welcome', '{\"name\": \"joined\"}', '', '')",
        [joining, reader.pk],
    )
    joined = other_connection.execute(
        digests.JOIN_SQL,
        {"carrier": carrier.notification_id, "channels": ["email"], "notification": joining},
    ).fetchall()
    assert joined == [("email", carrier.pk)]

    canceller, result = in_thread(lambda: cancel_notifications(key="order-7"))
    assert poll(waiting_for_a_lock), "the cancel should wait for the join's lock"
    assert canceller.is_alive()
    other_connection.execute("COMMIT")
    canceller.join(10)

    assert counts(result["value"]) == (1, 0, 0)
    assert NotificationDelivery.objects.get(pk=carrier.pk).status == Status.PENDING
    assert names_in(carrier) == ["joined"]


def test_a_cancel_waits_for_a_claim_and_then_leaves_the_digest_as_claimed(other_connection, reader):
    first = welcome(reader, "kept", key="order-7")
    carrier = carrier_of(first)
    make_due(carrier)
    other_connection.execute("BEGIN")
    claimed = other_connection.execute(outbox.CLAIM_SQL, {"batch_size": 10}).fetchall()
    assert [row[0] for row in claimed] == [carrier.pk]

    canceller, result = in_thread(lambda: cancel_notifications(key="order-7"))
    assert poll(waiting_for_a_lock), "the cancel should wait for the claim's lock"
    other_connection.execute("COMMIT")
    canceller.join(10)

    assert counts(result["value"]) == (0, 1, 0)
    assert NotificationDelivery.objects.get(pk=carrier.pk).status == Status.PROCESSING
    assert names_in(carrier) == ["kept"]


def test_a_claim_skips_a_digest_a_cancel_holds_and_then_sends_what_is_left(
    other_connection, reader
):
    welcome(reader, "cancelled", key="order-7")
    kept = welcome(reader, "kept")
    carrier = carrier_of(kept)
    make_due(carrier)
    params = {"key": "order-7", "user_id": None}
    other_connection.execute("BEGIN")
    locked = [row[0] for row in other_connection.execute(outbox.LOCK_CARRIERS_SQL, params)]
    assert locked == [carrier.pk]
    [row] = other_connection.execute(
        outbox.CANCEL_KEY_SQL, {**params, "carriers": locked, "open": OPEN}
    ).fetchall()
    assert row == (1, 0, 0, 0, 0)  # withdrawn, and the carrier still has an item

    assert outbox.claim(batch_size=10) == []  # skipped (locked), without waiting
    other_connection.execute("COMMIT")
    [claimed] = outbox.claim(batch_size=10)
    assert claimed.id == carrier.pk
    assert names_in(carrier) == ["kept"]


def test_a_join_waits_for_a_cancel_that_emptied_the_digest_and_takes_the_next_window(
    other_connection, reader
):
    first = welcome(reader, "cancelled", key="order-7")
    carrier = carrier_of(first)
    params = {"key": "order-7", "user_id": None}
    other_connection.execute("BEGIN")
    locked = [row[0] for row in other_connection.execute(outbox.LOCK_CARRIERS_SQL, params)]
    [row] = other_connection.execute(
        outbox.CANCEL_KEY_SQL, {**params, "carriers": locked, "open": OPEN}
    ).fetchall()
    assert row == (1, 0, 0, 1, 0)  # withdrawn, and the carrier emptied

    joiner, result = in_thread(lambda: welcome(reader, "later"))
    assert poll(waiting_for_a_lock), "the join should wait for the cancel's lock"
    other_connection.execute("COMMIT")
    joiner.join(10)

    # The cancelled carrier is not open any more: the join went to the next window's.
    later = result["value"]
    assert later.digested["email"] != carrier.pk
    assert NotificationDelivery.objects.get(pk=carrier.pk).status == Status.CANCELLED
    assert names_in(carrier_of(later)) == ["later"]
