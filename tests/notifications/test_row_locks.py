"""Every statement that takes row locks skips a row another transaction holds, at once.

Each case locks one of its rows from a second, open transaction and runs the statement under
a short lock_timeout: one that waited for the lock (a lost `SKIP LOCKED`) fails here within
that timeout instead of hanging the suite.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import transaction

from core import ratelimit
from core.models import RateLimitWindow
from notifications import broadcasts, outbox, retention
from notifications.drain import LANE_NAMES
from notifications.models import (
    BroadcastChunk,
    ChunkStatus,
    Notification,
    NotificationDelivery,
    Status,
)
from tests.helpers import BASE_DIR, execute, make_deliveries

LOCK_TIMEOUT = "2s"


def age_deliveries(ids: list[int], *, status: str, days: float) -> None:
    execute(
        "UPDATE notifications.notification_deliveries SET status = %s, "
        "created_at = now() - make_interval(secs => %s) WHERE id = ANY(%s)",
        [status, days * 86400, ids],
    )


def age_notifications(ids: list[int], *, days: float) -> None:
    execute(
        "UPDATE notifications.notifications SET created_at = now() - make_interval(secs => %s) "
        "WHERE id = ANY(%s)",
        [days * 86400, ids],
    )


@dataclass(frozen=True)
class Case:
    """One statement: setup(user) makes three rows it would process and returns their keys
    (column of table), run() runs it, left(keys) says which of them it has not processed."""

    setup: Callable[[object], list]
    table: str
    column: str
    run: Callable[[], object]
    left: Callable[[list], set]


def pending_left(ids):
    return set(
        NotificationDelivery.objects.filter(pk__in=ids, status=Status.PENDING).values_list(
            "pk", flat=True
        )
    )


def deliveries_left(ids):
    return set(NotificationDelivery.objects.filter(pk__in=ids).values_list("pk", flat=True))


def notifications_left(ids):
    return set(Notification.objects.filter(pk__in=ids).values_list("pk", flat=True))


def windows_left(keys):
    return set(RateLimitWindow.objects.filter(key__in=keys).values_list("key", flat=True))


def claim_lane(channel):
    return lambda user: make_deliveries(user, 3, channel=channel)


def prune_demo(*, older_than):
    # Imported when run: the showcase's module registers its message on import, which a run
    # without the showcase (V10R_SHOWCASES=0) must not do.
    from showcases import queue_demo

    return queue_demo.prune(older_than=older_than)


def finished_demo_rows(user):
    ids = make_deliveries(user, 3, channel="demo")
    age_deliveries(ids, status=Status.SENT, days=1)
    return ids


def old_sent_rows(user):
    ids = make_deliveries(user, 3)
    age_deliveries(ids, status=Status.SENT, days=3)
    return ids


def old_empty_notifications(user):
    made = Notification.objects.bulk_create(
        [Notification(user=user, type="test", message_key="test.note") for _ in range(3)]
    )
    ids = [n.pk for n in made]
    age_notifications(ids, days=3)
    return ids


def expired_windows(user):
    keys = [f"test:{i}" for i in range(3)]
    RateLimitWindow.objects.bulk_create(
        [RateLimitWindow(key=key, window_start="2000-01-01T00:00:00Z", hits=1) for key in keys]
    )
    return keys


def three_chunks(user):
    made = [
        broadcasts.send_broadcast(audience=[user], type="welcome", params={"name": "Ada"})
        for _ in range(3)
    ]
    return list(BroadcastChunk.objects.filter(broadcast__in=made).values_list("pk", flat=True))


def expand_every_chunk():
    while broadcasts.expand_next(lanes=LANE_NAMES) is not None:
        pass


def chunks_left(ids):
    return set(
        BroadcastChunk.objects.filter(pk__in=ids)
        .exclude(status=ChunkStatus.DONE)
        .values_list("pk", flat=True)
    )


def prune_old():
    return retention.prune(
        retention.RetentionPolicy(
            keep_sent=timedelta(days=1), keep_finished=timedelta(days=1), pause=0
        )
    )


DELIVERIES = "notifications.notification_deliveries"
CASES = {
    # One template, written once per lane into the claim.
    "the claim": Case(
        claim_lane("recording"), DELIVERIES, "id", lambda: outbox.claim(batch_size=3), pending_left
    ),
    "the demo rows' pruning": Case(
        finished_demo_rows,
        DELIVERIES,
        "id",
        lambda: prune_demo(older_than=timedelta(minutes=10)),
        deliveries_left,
    ),
    "retention's walk": Case(old_sent_rows, DELIVERIES, "id", prune_old, deliveries_left),
    "retention's sweep of empty notifications": Case(
        old_empty_notifications, "notifications.notifications", "id", prune_old, notifications_left
    ),
    "the expanders' claim of a broadcast's chunk": Case(
        three_chunks,
        "notifications.broadcast_chunks",
        "id",
        expand_every_chunk,
        chunks_left,
    ),
    "the rate limits' pruning": Case(
        expired_windows,
        "v10r_rate_limit_windows",
        "key",
        lambda: ratelimit.prune(older_than=timedelta(hours=1)),
        windows_left,
    ),
}


# The showcase's case needs the showcase (its pruning, its rows' index).
NEEDS_SHOWCASE = {"the demo rows' pruning"}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, id=name, marks=[pytest.mark.showcase] if name in NEEDS_SHOWCASE else [])
        for name, case in CASES.items()
    ],
)
def test_a_row_locked_by_another_open_transaction_is_skipped_without_waiting(
    case, other_connection, user
):
    keys = case.setup(user)
    locked = keys[0]
    with other_connection.transaction():
        other_connection.execute(
            f"SELECT 1 FROM {case.table} WHERE {case.column} = %s FOR UPDATE", [locked]
        )
        with transaction.atomic():
            # A statement that waits for the lock raises LockNotAvailable after this.
            execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            case.run()
        assert case.left(keys) == {locked}
    # Once the other transaction ends, the row is there for the next run.
    case.run()
    assert case.left(keys) == set()


def test_every_skip_locked_in_the_project_has_a_case_above():
    # A new statement that skips locked rows belongs in CASES, where its skipping is shown.
    sources = [
        path
        for package in ("core", "transports", "recipients", "notifications", "showcases", "v10r")
        for path in (BASE_DIR / package).rglob("*.py")
        if "migrations" not in path.parts
    ]
    found = sum(
        len(re.findall(r"^\s*FOR UPDATE\b.*\bSKIP LOCKED\b", path.read_text(), re.MULTILINE))
        for path in sources
    )
    assert found == len(CASES)
