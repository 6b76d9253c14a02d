"""Enqueue: the transactional outbox's write side.

Nothing here sends anything: it writes the rows a drain will claim. The public function keeps
the name callers reach for, send_notification, because that is what they mean by it (the
sending happens after their transaction commits, on a worker); its docstring says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Greatest

from notifications import catalogue, lanes, outbox, wakeup
from notifications.models import (
    DEFAULT_LANE,
    ChannelAddress,
    DatabaseNow,
    Notification,
    NotificationDelivery,
)
from notifications.outbox import CancelCounts

CANCEL_KEY_MAX = 200  # Notification.cancel_key's max_length


def _channels(channels: Iterable[str]) -> list[str]:
    if isinstance(channels, str):
        raise TypeError("channels must be a list of channel names, not one string")
    names = list(dict.fromkeys(channels))
    if not names:
        raise ValueError("A notification needs at least one channel.")
    unknown = [name for name in names if name not in settings.DELIVERY_CHANNELS]
    if unknown:
        known = ", ".join(sorted(settings.DELIVERY_CHANNELS))
        raise ValueError(f"Unknown channel(s) {', '.join(map(repr, unknown))}; known: {known}.")
    return names


def _lane(priority: str) -> str:
    known = lanes.names()
    if priority not in known:
        raise ValueError(f"Unknown priority {priority!r}; known: {', '.join(known)}.")
    return priority


def _send_at(send_at: Any) -> datetime | None:
    if send_at is None:
        return None
    if not isinstance(send_at, datetime):
        raise TypeError(f"send_at must be a datetime, not {type(send_at).__name__}")
    if send_at.utcoffset() is None:
        raise ValueError(
            "send_at must be an aware datetime (with a time zone), such as "
            "django.utils.timezone.now() + timedelta(hours=1); a naive one is ambiguous."
        )
    return send_at


def _cancel_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"cancel_key must be a string, not {type(key).__name__}")
    if len(key) > CANCEL_KEY_MAX:
        raise ValueError(f"cancel_key must be at most {CANCEL_KEY_MAX} characters.")
    if "\x00" in key:
        raise ValueError("cancel_key must not contain a NUL character.")
    return key


def send_notification(
    *,
    user,
    type: str,  # noqa: A002 - the column's name
    message_key: str,
    params: Mapping[str, Any] | None = None,
    channels: Iterable[str] | None = None,
    action_url: str = "",
    priority: str = DEFAULT_LANE,
    send_at: datetime | None = None,
    cancel_key: str = "",
) -> Notification:
    """Queue a notification: write it, and one pending delivery per channel, for a drain to
    send. With no channels named, the user's own choose them (channels_for).

    priority names the claim's lane (DELIVERY_LANES: "high", "normal", "low", ...). send_at
    (an aware datetime) holds the sends until then, by the database's clock; a time already
    past means now. cancel_key names the notification for cancel_notifications(), which can
    withdraw its deliveries until a drain has claimed them.

    Runs inside the caller's transaction when there is one (the outbox pattern: the
    notification commits or rolls back with the change that caused it).
    """
    lane, when, key = _lane(priority), _send_at(send_at), _cancel_key(cancel_key)
    params = dict(params or {})
    if channels is None:
        channels = channels_for(user)
        if not channels:
            raise ValueError(
                f"User {user.pk} has no email address and no active address on any channel."
            )
    names = _channels(channels)
    if not type or len(type) > 64:
        raise ValueError("type must be 1 to 64 characters.")
    catalogue.validate(key=message_key, params=params)
    try:
        json.dumps(params)
    except TypeError as exc:
        raise ValueError(f"params must be JSON-serialisable: {exc}") from None
    with transaction.atomic():
        notification = Notification.objects.create(
            user=user,
            type=type,
            message_key=message_key,
            message_params=params,
            action_url=action_url,
            cancel_key=key,
        )
        add_channels(notification=notification, channels=names, priority=lane, send_at=when)
    return notification


def cancel_notifications(*, key: str, user=None) -> CancelCounts:
    """Withdraw every delivery under cancel_key key (of user's notifications only, when
    given) that no drain has claimed yet; say how many were cancelled, how many were being
    sent at that moment (too late), and how many had finished already.

    One statement: a delivery is either claimed by a drain or cancelled, never both
    (notifications/outbox.py, CANCEL_SQL, says why)."""
    key = _cancel_key(key)
    if not key:
        raise ValueError("key must not be empty: a notification without a cancel_key has none.")
    return outbox.cancel_key(key=key, user_id=None if user is None else _user_id(user))


def _user_id(user) -> int:
    """A saved user's id, or an id given as an int: never None, which would mean every user."""
    user_id = getattr(user, "pk", user)
    if isinstance(user_id, bool) or not isinstance(user_id, int):
        raise TypeError(
            f"user must be a saved user or a user id, not {user!r}; leave it out (None) to "
            "cancel the key for every user."
        )
    return user_id


def channels_for(user) -> list[str]:
    """The channels a user can be reached on: email when the user has an address (and the site
    runs it), then each channel of the user's active addresses that the site runs."""
    names = ["email"] if user.email and "email" in settings.DELIVERY_CHANNELS else []
    active = ChannelAddress.objects.filter(user=user, is_active=True).order_by("channel")
    names += [
        name
        for name in active.values_list("channel", flat=True).distinct()
        if name in settings.DELIVERY_CHANNELS and name not in names
    ]
    return names


def add_channels(
    *,
    notification: Notification,
    channels: Iterable[str],
    priority: str = DEFAULT_LANE,
    send_at: datetime | None = None,
) -> None:
    """Queue an existing notification on more channels; a channel it has already is skipped.

    The unique (notification, channel) constraint makes this safe to call twice, even from
    two transactions at once (ON CONFLICT DO NOTHING).
    """
    lane, when = _lane(priority), _send_at(send_at)
    extra = {}
    if when is not None:
        # The database's clock decides: a send_at it has passed is due at once.
        extra["next_attempt_at"] = Greatest(DatabaseNow(), Value(when))
    NotificationDelivery.objects.bulk_create(
        [
            NotificationDelivery(notification=notification, channel=n, lane=lane, **extra)
            for n in _channels(channels)
        ],
        ignore_conflicts=True,
    )
    # The drains hear of the rows once they are committed (at once outside a transaction).
    transaction.on_commit(wakeup.request_wake, robust=True)
