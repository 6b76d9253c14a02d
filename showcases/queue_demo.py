""" "Try it": a visitor's own notification through the real outbox, on the demo channel.

Visitors share the site's queue, so their rows are kept from hurting real deliveries: the
claim takes them in a lane of their own behind every real row (notifications/outbox.py), at
most PENDING_LIMIT of them are due at once, they never count as needing a staff member's
attention, and finished ones are deleted KEEP after they were queued.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core import pruning
from notifications import backoff
from notifications.enqueue import send_notification
from notifications.heartbeat import LoopState, LoopStatus
from notifications.models import (
    FINISHED_SQL,
    DatabaseNow,
    Notification,
    NotificationDelivery,
    ShownStatus,
    Status,
)
from showcases import notifications as catalogued
from showcases.channel import DEMO_CHANNEL, DEMO_LANE

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
        type=catalogued.MESSAGE,
        params={"label": label, "fail": fail},
        channels=[DEMO_CHANNEL],
        priority=DEMO_LANE,
    ).notification


def feed(notification_ids: list[str]) -> list[NotificationDelivery]:
    """The visitor's demo deliveries, newest first, each with the database's clock (db_now)."""
    return list(
        NotificationDelivery.objects.filter(
            notification_id__in=notification_ids, channel=DEMO_CHANNEL
        )
        .annotate(db_now=DatabaseNow())
        .select_related("notification")
        .order_by("-created_at", "-id")[:FEED_SIZE]
    )


def pickup(delivery: NotificationDelivery) -> timedelta | None:
    """How long after it was queued a drain loop claimed the row, or None while that is unknown.

    A claim counts attempts and stamps attempted_at with its own now(). With one claim so far
    (attempts == 1) attempted_at is the first claim's, so the wait is the pickup's; the row may
    have been sent, refused or be waiting out a backoff since. A row claimed again (a send
    retried, a lapsed lease, a time-boxed drain that handed it back) keeps only its latest
    claim's time, after a wait of our own making: nothing is shown for it rather than a wait
    that was not the pickup. created_at is the enqueuing transaction's now(), so the wait
    includes the moments until that transaction committed.
    """
    if delivery.attempts != 1 or delivery.attempted_at is None:
        return None
    return max(delivery.attempted_at - delivery.created_at, timedelta(0))


def about(value: timedelta) -> str:
    """A wait as a visitor reads it: to the second under two minutes, else to the minute."""
    from core.templatetags.units import duration

    seconds = max(round(value.total_seconds()), 0)
    if seconds >= 120:
        seconds = round(seconds / 60) * 60
    return duration(timedelta(seconds=seconds))


def _reason(delivery: NotificationDelivery) -> str:
    if delivery.error_code == "DEMO_FAILURE":
        return _("as you asked, the demo channel refused it")
    # Any other code comes from the queue itself (a lapsed lease, say): shown as it is stored.
    return delivery.error_code or _("no reason recorded")


def _next_look(loop: LoopStatus, now: datetime) -> str:
    """When a pending row will be seen: at its wake-up, else the loop's next tick, or why
    nothing will see it."""
    if loop.state == LoopState.DORMANT:
        return _("This host keeps no loop running: the next cron run will send it.")
    if loop.state == LoopState.STOPPED or loop.last_tick is None or loop.interval is None:
        return _("No drain loop is running, so it waits until one starts.")
    # The commit that queued it sent the drains a wake-up (notifications/wakeup.py), which a
    # listening loop takes at once; the tick is what finds it should that wake-up be lost.
    wait = loop.last_tick + loop.interval - now
    if wait <= timedelta(seconds=1):
        return _(
            "Its commit sent the drain loop a wake-up; should the loop miss it, it still looks "
            "for due rows every %(interval)s, and its next look is due now."
        ) % {"interval": about(loop.interval)}
    return _(
        "Its commit sent the drain loop a wake-up; should the loop miss it, it still looks "
        "for due rows every %(interval)s, next in about %(wait)s."
    ) % {"interval": about(loop.interval), "wait": about(wait)}


def explain(delivery: NotificationDelivery, *, loop: LoopStatus, max_attempts: int) -> str:
    """One or two sentences under a feed row: what the row waits for, or what became of it.

    delivery carries db_now (see feed()), so waits are measured on the clock that set them."""
    now = delivery.db_now
    sends = delivery.attempts - delivery.attempt_base
    shown = delivery.shown_status
    if shown == ShownStatus.PENDING:
        if delivery.next_attempt_at > now + timedelta(seconds=1):
            return _("Due in about %(wait)s.") % {"wait": about(delivery.next_attempt_at - now)}
        return _next_look(loop, now)
    if shown == ShownStatus.PROCESSING:
        return _("A drain loop claimed it and is sending it now.")
    if shown == ShownStatus.SENT:
        return _("Delivered on send %(n)d.") % {"n": sends}
    if shown == ShownStatus.FAILED:
        return _("Failed for good on send %(n)d: %(reason)s.") % {
            "n": sends,
            "reason": _reason(delivery),
        }
    if shown == ShownStatus.CANCELLED:
        return _("Cancelled before a drain loop sent it; it will not be sent.")
    if shown == ShownStatus.DEAD:
        return ngettext(
            "Given up after %(n)d failed send: %(reason)s.",
            "Given up after %(n)d failed sends: %(reason)s.",
            sends,
        ) % {"n": sends, "reason": _reason(delivery)}
    # Retrying: say what failed, when the next send is, and when the budget runs out.
    failed = _("Send %(n)d of %(max)d failed: %(reason)s.") % {
        "n": sends,
        "max": max_attempts,
        "reason": _reason(delivery),
    }
    wait = max(delivery.next_attempt_at - now, timedelta(0))
    # Should every send fail: the waits after sends n+1 … max-1 come after the next one.
    rest = sum(
        (backoff.base_delay(attempt=k) for k in range(sends + 1, max_attempts)), timedelta(0)
    )
    if wait <= timedelta(seconds=1):
        then = _("The next send is due now, at the drain loop's next look.")
    else:
        then = _("The next send is in about %(wait)s.") % {"wait": about(wait)}
    if not delivery.notification.message_params.get("fail"):
        return f"{failed} {then}"
    ends = _("Every send of it fails, so after send %(max)d, in about %(total)s, it is dead.") % {
        "max": max_attempts,
        "total": about(wait + rest),
    }
    return f"{failed} {then} {ends}"


# Finished demo rows and their notifications, oldest first, a bounded number per call. Served
# by the deliveries_demo partial index (showcases/migrations/0001_deliveries_demo.py). Only a
# notification whose one delivery is the demo row goes with it: "Try it" makes no other kind,
# and should code ever send a notification on demo and another channel, this leaves that
# notification alone instead of failing on it forever.
PRUNE_DEMO_SQL = f"""
WITH finished AS MATERIALIZED (
    SELECT d.id, d.notification_id
    FROM notifications.notification_deliveries AS d
    WHERE d.channel = '{DEMO_CHANNEL}'
      AND {FINISHED_SQL}
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
            PRUNE_DEMO_SQL, {"older_than_seconds": older_than.total_seconds(), "limit": limit}
        )
        return cursor.rowcount


def tidy(sender, **kwargs) -> dict[str, int]:
    """The queue's outbox_idle receiver (connected in ShowcasesConfig.ready()): delete the
    finished demo notifications older than KEEP, a bounded number."""
    return {
        "demo_notifications": pruning.repeat(
            "demo notifications", lambda: prune(limit=pruning.BATCH)
        )
    }
