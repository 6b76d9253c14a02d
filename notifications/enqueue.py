"""Enqueue: the transactional outbox's write side.

Nothing here sends anything: it writes the rows a drain will claim. The public function keeps
the name callers reach for, send_notification, because that is what they mean by it (the
sending happens after their transaction commits, on a worker); its docstring says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import transaction

from notifications import catalogue, wakeup
from notifications.models import ChannelAddress, Notification, NotificationDelivery


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


def send_notification(
    *,
    user,
    type: str,  # noqa: A002 - the column's name
    message_key: str,
    params: Mapping[str, Any] | None = None,
    channels: Iterable[str] | None = None,
    action_url: str = "",
) -> Notification:
    """Queue a notification: write it, and one pending delivery per channel, for a drain to
    send. With no channels named, the user's own choose them (channels_for).

    Runs inside the caller's transaction when there is one (the outbox pattern: the
    notification commits or rolls back with the change that caused it).
    """
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
        )
        add_channels(notification=notification, channels=names)
    return notification


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


def add_channels(*, notification: Notification, channels: Iterable[str]) -> None:
    """Queue an existing notification on more channels; a channel it has already is skipped.

    The unique (notification, channel) constraint makes this safe to call twice, even from
    two transactions at once (ON CONFLICT DO NOTHING).
    """
    NotificationDelivery.objects.bulk_create(
        [NotificationDelivery(notification=notification, channel=n) for n in _channels(channels)],
        ignore_conflicts=True,
    )
    # The drains hear of the rows once they are committed (at once outside a transaction).
    transaction.on_commit(wakeup.request_wake, robust=True)
