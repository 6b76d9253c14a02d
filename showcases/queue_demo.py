""" "Try it": a visitor's own notification through the real outbox, on the demo channel."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from notifications.models import Notification, NotificationDelivery
from notifications.send import send_notification

DEMO_USERNAME = "demo-visitor"
FEED_SIZE = 8


def demo_user():
    """The (inactive, password-less) user that owns the visitors' demo notifications."""
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def enqueue(*, label: str, fail: bool) -> Notification:
    return send_notification(
        user=demo_user(),
        type="demo",
        message_key="queue.demo",
        params={"label": label, "fail": fail},
        channels=["demo"],
    )


def feed(notification_ids: list[str]) -> list[NotificationDelivery]:
    """The visitor's demo deliveries, newest first."""
    return list(
        NotificationDelivery.objects.filter(notification_id__in=notification_ids, channel="demo")
        .select_related("notification")
        .order_by("-created_at", "-id")[:FEED_SIZE]
    )
