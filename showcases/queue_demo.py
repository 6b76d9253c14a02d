""" "Try it": a visitor's own notification through the real outbox, on the demo channel.

Visitors share the site's queue, so their rows are kept from hurting real deliveries: the
claim takes them in a lane of their own behind every real row (notifications/outbox.py), at
most PENDING_LIMIT of them are due at once, they never count as needing a staff member's
attention, and finished ones are deleted KEEP after they were queued.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q

from notifications.enqueue import send_notification
from notifications.models import (
    DEMO_CHANNEL,
    DatabaseNow,
    Notification,
    NotificationDelivery,
    Status,
)

DEMO_USERNAME = "demo-visitor"
FEED_SIZE = 8
# Site-wide: about 40 s of demo sends at one round of 0.8 s sends per batch.
PENDING_LIMIT = 200
KEEP = timedelta(minutes=10)
SOON = timedelta(minutes=1)


class QueueFull(Exception):
    """The demo queue holds PENDING_LIMIT rows already: try again in a minute."""


def demo_user():
    """The (inactive, password-less) user that owns the visitors' demo notifications."""
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def waiting() -> int:
    """Count the demo rows the drain has to work on soon, up to PENDING_LIMIT.

    Rows being sent, and rows due within SOON. A failing row waiting out its backoff (up to
    half an hour) costs nothing meanwhile, and counting it would let one visitor who keeps
    asking for failures hold the demo queue full for everybody."""
    soon = NotificationDelivery.objects.filter(channel=DEMO_CHANNEL).filter(
        Q(status=Status.PROCESSING)
        | Q(status=Status.PENDING, next_attempt_at__lte=DatabaseNow() + SOON)
    )
    return soon[:PENDING_LIMIT].count()


def enqueue(*, label: str, fail: bool) -> Notification:
    """Queue one demo notification, or raise QueueFull.

    Two visitors at the very edge may both get in: the limit can be passed by as many
    requests as run at once, never by more."""
    if waiting() >= PENDING_LIMIT:
        raise QueueFull
    return send_notification(
        user=demo_user(),
        type="demo",
        message_key="queue.demo",
        params={"label": label, "fail": fail},
        channels=[DEMO_CHANNEL],
    )


def feed(notification_ids: list[str]) -> list[NotificationDelivery]:
    """The visitor's demo deliveries, newest first."""
    return list(
        NotificationDelivery.objects.filter(
            notification_id__in=notification_ids, channel=DEMO_CHANNEL
        )
        .select_related("notification")
        .order_by("-created_at", "-id")[:FEED_SIZE]
    )


# Finished demo rows and their notifications, oldest first, a bounded number per call. Served
# by the deliveries_demo partial index. Only a notification whose one delivery is the demo row
# goes with it: "Try it" makes no other kind, and should code ever send a notification on demo
# and another channel, this leaves that notification alone instead of failing on it forever.
PRUNE_SQL = """
WITH finished AS MATERIALIZED (
    SELECT d.id, d.notification_id
    FROM notifications.notification_deliveries AS d
    WHERE d.channel = 'demo'
      AND d.status IN ('sent', 'failed', 'dead')
      AND d.created_at < now() - make_interval(secs => %(older_than_seconds)s)
      AND NOT EXISTS (
          SELECT FROM notifications.notification_deliveries AS other
          WHERE other.notification_id = d.notification_id AND other.id <> d.id
      )
    ORDER BY d.created_at
    LIMIT %(limit)s
    FOR UPDATE OF d SKIP LOCKED
),
gone AS (
    DELETE FROM notifications.notification_deliveries AS d
    USING finished AS f
    WHERE d.id = f.id
    RETURNING d.notification_id
)
DELETE FROM notifications.notifications AS n
USING gone AS g
WHERE n.id = g.notification_id
""".strip()


def prune(*, older_than: timedelta = KEEP, limit: int = 1000) -> int:
    """Delete up to limit finished demo notifications queued before older_than ago."""
    with connection.cursor() as cursor:
        cursor.execute(
            PRUNE_SQL, {"older_than_seconds": older_than.total_seconds(), "limit": limit}
        )
        return cursor.rowcount
