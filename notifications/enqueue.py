"""Enqueue: the transactional outbox's write side, where the recipient's preferences are kept.

Nothing here sends anything: it writes the rows a drain will claim. The public function keeps
the name callers reach for, send_notification, because that is what they mean by it (the
sending happens after their transaction commits, on a worker); its docstring says so.

Every delivery asked for is written, whether it will be sent or not: one the recipient cannot
or does not want to receive is a `skipped` row with its reason (SkipReason), in the same
insert, so "why did I never get it?" has an answer in the admin. A row the recipient's quiet
hours hold is pending, due when the window ends (held_until says so).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Value, signals
from django.db.models.functions import Greatest
from django.utils.module_loading import import_string

import transports
from notifications import digests, lanes, outbox, wakeup
from notifications.models import (
    DEFAULT_LANE,
    DatabaseNow,
    Notification,
    NotificationDelivery,
    SkipReason,
    Status,
)
from notifications.outbox import CancelCounts
from recipients import catalogue, preferences, quiet, windows
from recipients.models import ChannelAddress
from transports.base import AddressSource, QuietHours

CANCEL_KEY_MAX = 200  # Notification.cancel_key's max_length


@dataclass(frozen=True)
class Enqueued:
    """What send_notification() (or add_channels()) wrote: the notification, the channels it
    queued for a drain to send on their own, the channels it wrote as skipped, each with its
    reason (a SkipReason value: "opted_out", "no_address", "channel_off"), and the channels
    on which it joined a digest instead (the recipient's digest, or its category's throttle
    window), each with the digest's delivery id."""

    notification: Notification
    queued: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)
    digested: dict[str, int] = field(default_factory=dict)


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


def _type(kind: Any) -> str:
    """kind, when the catalogue has a message of that key; else a ValueError naming them."""
    if not isinstance(kind, str) or kind not in catalogue.MESSAGES:
        known = ", ".join(sorted(catalogue.MESSAGES))
        raise ValueError(f"Unknown notification type {kind!r}; known types: {known}.")
    return kind


class Checked(NamedTuple):
    kind: str
    params: dict[str, Any]
    names: list[str] | None
    lane: str
    when: datetime | None
    cancel_key: str


def checked(*, kind, params, channels, priority, send_at, cancel_key) -> Checked:
    """A send's arguments as send_notification() and send_broadcast() take them, checked:
    ValueError or TypeError, saying what is wrong, for an unknown message, channel or lane,
    parameters the message does not take or that are not JSON, a naive send_at, a bad key."""
    kind = _type(kind)
    lane, when, key = _lane(priority), _send_at(send_at), _cancel_key(cancel_key)
    params = dict(params or {})
    names = None if channels is None else _channels(channels)
    catalogue.validate(key=kind, params=params)
    try:
        json.dumps(params)
    except TypeError as exc:
        raise ValueError(f"params must be JSON-serialisable: {exc}") from None
    return Checked(kind, params, names, lane, when, key)


def send_notification(
    *,
    user,
    type: str,  # noqa: A002 - the column's name
    params: Mapping[str, Any] | None = None,
    channels: Iterable[str] | None = None,
    action_url: str = "",
    priority: str = DEFAULT_LANE,
    send_at: datetime | None = None,
    cancel_key: str = "",
) -> Enqueued:
    """Queue a notification: write it, and one delivery per channel, for a drain to send.

    type is the catalogue's key of the message ("welcome", "account.password_reset"); its
    category decides, with the recipient's preferences, which channels are queued and which
    are written as skipped (Enqueued says which). With no channels named, the user's own
    choose: every channel they have an address on, a turned-off one included (skipped,
    channel_off); a user with no address anywhere gets one skipped email row (no_address).

    priority names the claim's lane (DELIVERY_LANES: "high", "normal", "low", ...). send_at
    (an aware datetime) holds the sends until then, by the database's clock; a time already
    past means now. Quiet hours may hold a delivery past it (held_until). cancel_key names the
    notification for cancel_notifications(), which can withdraw its deliveries until a drain
    has claimed them.

    Runs inside the caller's transaction when there is one (the outbox pattern: the
    notification, and every row written as skipped, commit or roll back with the change that
    caused it).
    """
    kind, params, names, lane, when, key = checked(
        kind=type,
        params=params,
        channels=channels,
        priority=priority,
        send_at=send_at,
        cancel_key=cancel_key,
    )
    written = {
        "user": user,
        "kind": kind,
        "params": params,
        "action_url": action_url,
        "cancel_key": key,
        "lane": lane,
        "when": when,
    }
    # An unsaved user takes the ORM's path, which refuses it as it always has.
    if user.pk is not None and names is not None and _unread_choices_suffice(names):
        # Decided as for a recipient who chose nothing, and written only if the database
        # agrees, in the same statement: no read of their choices before it.
        unchosen = _decide(
            user=user, kind=kind, names=names, when=when, prefs=preferences.Preferences()
        )
        if _writes_in_one_statement(unchosen, when=when):
            enqueued = _write_at_once(decisions=unchosen, unless_chosen=True, **written)
            if enqueued is not None:
                return enqueued
    decisions = _decide(user=user, kind=kind, names=names, when=when)
    if user.pk is not None and _writes_in_one_statement(decisions, when=when):
        return _write_at_once(decisions=decisions, **written)
    with transaction.atomic():
        notification = Notification.objects.create(
            user=user,
            type=kind,
            # The column stays for the rows queued before types were the catalogue's keys.
            message_key=kind,
            message_params=params,
            action_url=action_url,
            cancel_key=key,
        )
        return _write(notification, decisions, lane=lane, when=when)


@dataclass(frozen=True)
class _Decisions:
    """Per channel, in order: None (queue it) or a SkipReason; and when quiet hours hold the
    ones queued on channels in held; the category and preferences they were decided by."""

    reasons: dict[str, str | None]
    category: str
    prefs: preferences.Preferences
    held: frozenset[str] = frozenset()
    held_until: datetime | None = None


@cache
def _address_source(path: str) -> AddressSource:
    return import_string(path).address_source


def _decide(
    *,
    user,
    kind: str,
    names: list[str] | None,
    when: datetime | None = None,
    reached: bool = False,
    prefs: preferences.Preferences | None = None,
):
    """Which of names (None: the user's own) are queued for user, and why the others are not.

    Reads the preferences (one query) unless given, the user's addresses when a channel needs
    one (one), and the end of the quiet window when a queued channel is held (one)."""
    category_name = catalogue.MESSAGES[kind].category
    category = catalogue.CATEGORIES[category_name]
    if prefs is None:
        prefs = preferences.of(user)
    sources = {name: _address_source(path) for name, path in settings.DELIVERY_CHANNELS.items()}
    active: set[str] = set()
    turned_off: set[str] = set()
    if names is None or any(sources[n] == AddressSource.CHANNEL_ADDRESS for n in names):
        for channel, is_active in ChannelAddress.objects.filter(user=user).values_list(
            "channel", "is_active"
        ):
            (active if is_active else turned_off).add(channel)
        turned_off -= active
    if names is None:
        names = _own_channels(user, active | turned_off, sources)

    def reachable(name: str) -> str | None:
        source = sources[name]
        if source == AddressSource.EMAIL:
            return None if user.email else SkipReason.NO_ADDRESS
        if source == AddressSource.CHANNEL_ADDRESS:
            if name in active:
                return None
            return SkipReason.CHANNEL_OFF if name in turned_off else SkipReason.NO_ADDRESS
        return None

    reasons: dict[str, str | None] = {}
    for name in names:
        reason = reachable(name)
        if reason is None and not prefs.enabled(category_name, name):
            reason = SkipReason.OPTED_OUT
        reasons[name] = reason
    # reached: the notification goes out on a channel already (add_channels), so the rule
    # below has nothing to keep.
    if category.required and all(reasons.values()) and not reached:
        # A required category is never muted: its first reachable channel stays on whatever
        # the stored choices say (the preference centre refuses to save that, but a channel's
        # address may have gone since).
        first = next((n for n, r in reasons.items() if r == SkipReason.OPTED_OUT), None)
        if first is not None:
            reasons[first] = None
    held = frozenset(
        name for name, reason in reasons.items() if reason is None and prefs.holds(name)
    )
    if held and not category.required:
        until = quiet.held_until(
            time_zone=prefs.time_zone, start=prefs.quiet_start, end=prefs.quiet_end, due=when
        )
        if until is not None:
            return _Decisions(reasons, category_name, prefs, held, until)
    return _Decisions(reasons, category_name, prefs)


def _own_channels(user, addressed: set[str], sources) -> list[str]:
    """The channels a user has an address on (email first, then the rest by name, then the
    inbox); email alone, to be written as skipped, when they have none at all."""
    names = [n for n, s in sources.items() if s == AddressSource.EMAIL and user.email]
    names += sorted(n for n in addressed if n in sources and n not in names)
    # Every account has an inbox: a channel that delivers there reaches everyone.
    names += [n for n, s in sources.items() if s == AddressSource.ACCOUNT]
    if names:
        return names
    email = [n for n, s in sources.items() if s == AddressSource.EMAIL]
    if not email:
        raise ValueError(
            f"User {user.pk} has no address on any channel this site runs, and the site runs "
            "no email channel to record the notification as skipped on."
        )
    return email[:1]


def _unread_choices_suffice(names: list[str]) -> bool:
    """Whether the send to names can be decided without reading the recipient's choices
    first, as for one who chose nothing, the statement that writes it checking that they did
    not (UNCHOSEN_SQL): no channel of names needs an address row read."""
    return all(_sources().get(name) in _ADDRESS_IN_HAND for name in names)


# A channel whose address is the account's email or the account itself: decided from the
# user object alone.
_ADDRESS_IN_HAND = frozenset({AddressSource.EMAIL, AddressSource.ACCOUNT, AddressSource.NONE})


@cache
def _sources_of(channels: tuple[tuple[str, str], ...]) -> dict[str, AddressSource]:
    return {name: _address_source(path) for name, path in channels}


def _sources() -> dict[str, AddressSource]:
    return _sources_of(tuple(settings.DELIVERY_CHANNELS.items()))


def _writes_in_one_statement(decisions: _Decisions, *, when: datetime | None) -> bool:
    """Whether the notification and its rows are one INSERT: nothing joins a digest or counts
    against a throttle (the rows _gather would write), and no receiver listens for a
    Notification's save (the statement sends no signal; Notification.objects.create does)."""
    if any(reason is None for reason in decisions.reasons.values()):
        if decisions.prefs.digest_for(decisions.category) is not None:
            return False
        if when is None and digests.throttle_of(decisions.category) is not None:
            return False
    return not (
        signals.pre_save.has_listeners(Notification)
        or signals.post_save.has_listeners(Notification)
    )


# The notification and its deliveries in one statement: what Notification.objects.create and
# bulk_create wrote in two, inside a savepoint of their own, which a single statement does not
# need. The rows come as one JSON array, a row a channel: json.dumps is one call in C, where
# adapting four Python lists to arrays cost more than the rest of the write. A row neither held
# nor scheduled is due now(), as the column's default would have it.
WRITE_SQL = """
WITH made AS (
    INSERT INTO notifications.notifications
        (id, user_id, type, message_key, message_params, action_url, cancel_key)
    VALUES (%(id)s, %(user)s, %(kind)s, %(kind)s, %(params)s::jsonb, %(action_url)s,
            %(cancel_key)s)
    RETURNING id, created_at
), rows AS (
    INSERT INTO notifications.notification_deliveries
        (notification_id, channel, lane, status, skip_reason, decided_version,
         next_attempt_at, held_until, held_from)
    SELECT made.id, d.channel, %(lane)s, d.status, d.skip_reason, %(version)s,
           CASE
               WHEN d.held THEN %(held_until)s::timestamptz
               WHEN d.status = 'pending' THEN GREATEST(now(), %(when)s::timestamptz)
               ELSE now()
           END,
           CASE WHEN d.held THEN %(held_until)s::timestamptz END,
           CASE WHEN d.held THEN GREATEST(now(), %(when)s::timestamptz) END
    FROM made,
         jsonb_to_recordset(%(rows)s::jsonb)
             AS d(channel text, status text, skip_reason text, held boolean)
    ON CONFLICT DO NOTHING
)
SELECT created_at FROM made
"""


# WRITE_SQL for a send decided as for a recipient who chose nothing (_decide with the default
# Preferences): written only if they did not, in the statement's own snapshot, by a function of
# the database (migration 0019 defines it, and says why a function). They chose nothing that
# matters here when no choice of theirs names the category on one of these channels, they take
# it as no digest (when it can be one), and no quiet hours of theirs hold one of the queued
# channels (when they can: always those of a channel that interrupts, those of email when they
# ask). Their choices' version is read there too. NULL comes back when they did choose: the
# caller reads their choices and decides again. Every argument is cast, so the call names one
# function however the driver types its parameters.
UNCHOSEN_SQL = """
SELECT notifications.write_unchosen(
    %(id)s::uuid, %(user)s::integer, %(kind)s::text, %(params)s::jsonb, %(action_url)s::text,
    %(cancel_key)s::text, %(category)s::text, %(names)s::text[], %(digests)s::boolean,
    %(quiet)s::boolean, %(always)s::boolean, %(lane)s::text, %(when)s::timestamptz,
    %(rows)s::jsonb
)
"""


def _quoted(name: str) -> str:
    """name as an element of a PostgreSQL array literal."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_at_once(
    *,
    user,
    kind: str,
    params: dict[str, Any],
    action_url: str,
    cancel_key: str,
    decisions: _Decisions,
    lane: str,
    when: datetime | None,
    unless_chosen: bool = False,
) -> Enqueued | None:
    """Write what _write writes when nothing is gathered, in one statement (WRITE_SQL), and
    return the notification as Notification.objects.create would have. unless_chosen: the
    decisions are a recipient's who chose nothing, written only if they did not (UNCHOSEN_SQL;
    None when they did, and nothing is written)."""
    reasons = decisions.reasons
    notification_id = uuid.uuid4()
    checks = {}
    if unless_chosen:
        category = catalogue.CATEGORIES[decisions.category]
        queued = [transports.get(n) for n, r in reasons.items() if r is None]
        kinds = {c.quiet_hours for c in queued if c is not None}
        checks = {
            "category": decisions.category,
            "digests": not category.required,
            "quiet": not category.required and bool(kinds - {QuietHours.NEVER}),
            "always": QuietHours.ALWAYS in kinds,
            # One array literal, a string: cheaper to pass than a list adapted element by
            # element, and the names are the settings' keys, quoted here all the same.
            "names": "{" + ",".join(_quoted(name) for name in reasons) + "}",
        }
    with connection.cursor() as cursor:
        cursor.execute(
            UNCHOSEN_SQL if unless_chosen else WRITE_SQL,
            {
                **checks,
                "id": notification_id,
                "user": user.pk,
                "kind": kind,
                "params": json.dumps(params),
                "action_url": action_url,
                "cancel_key": cancel_key,
                "lane": lane,
                "version": decisions.prefs.version,
                "held_until": decisions.held_until,
                "when": when,
                "rows": json.dumps(
                    [
                        {
                            "channel": name,
                            "status": Status.PENDING if reason is None else Status.SKIPPED,
                            "skip_reason": "" if reason is None else reason,
                            "held": name in decisions.held,
                        }
                        for name, reason in reasons.items()
                    ]
                ),
            },
        )
        (created_at,) = cursor.fetchone()
    if created_at is None:
        return None
    notification = Notification(
        id=notification_id,
        user=user,
        type=kind,
        message_key=kind,
        message_params=params,
        action_url=action_url,
        cancel_key=cancel_key,
        created_at=created_at,
    )
    notification._state.adding = False
    notification._state.db = connection.alias
    queued = tuple(n for n, r in reasons.items() if r is None)
    if queued:
        # The drains hear of the rows once they are committed (at once outside a transaction).
        transaction.on_commit(wakeup.request_wake, robust=True)
    return Enqueued(
        notification=notification,
        queued=queued,
        skipped={n: str(r) for n, r in reasons.items() if r is not None},
    )


def _write(
    notification: Notification,
    decisions: _Decisions,
    *,
    lane: str,
    when: datetime | None,
    throttled: bool = True,
) -> Enqueued:
    """Write the decided rows; throttled=False leaves the category's throttle uncounted
    (add_channels: the notification was counted when it was sent)."""
    sendable = [n for n, r in decisions.reasons.items() if r is None]
    digested = _gather(notification, decisions, sendable, lane=lane, when=when, throttled=throttled)
    due = {}
    if when is not None:
        # The database's clock decides: a send_at it has passed is due at once.
        due["next_attempt_at"] = Greatest(DatabaseNow(), Value(when))
    held = {
        "next_attempt_at": decisions.held_until,
        "held_until": decisions.held_until,
        # When it would have gone without quiet hours: where it goes back to if they change.
        "held_from": due.get("next_attempt_at", DatabaseNow()),
    }
    rows = []
    for name, reason in decisions.reasons.items():
        if name in digested:
            continue
        if reason is not None:
            state = {"status": Status.SKIPPED, "skip_reason": reason}
        else:
            state = held if name in decisions.held else due
        rows.append(
            NotificationDelivery(
                notification=notification,
                channel=name,
                lane=lane,
                # What a claim compares with the recipient's version (drain.py).
                decided_version=decisions.prefs.version,
                **state,
            )
        )
    NotificationDelivery.objects.bulk_create(rows, ignore_conflicts=True)
    queued = tuple(n for n in sendable if n not in digested)
    if queued:
        # The drains hear of the rows once they are committed (at once outside a transaction).
        transaction.on_commit(wakeup.request_wake, robust=True)
    return Enqueued(
        notification=notification,
        queued=queued,
        skipped={n: str(r) for n, r in decisions.reasons.items() if r is not None},
        digested=digested,
    )


def _gather(
    notification: Notification,
    decisions: _Decisions,
    names: list[str],
    *,
    lane: str,
    when: datetime | None,
    throttled: bool,
) -> dict[str, int]:
    """Join names to a digest where the recipient takes the category as one, or where this
    notification is one past its category's throttle; return the digest delivery per channel
    (none: each is sent on its own). Runs in the enqueuing transaction, whose rollback takes
    the join and the throttle's count with it."""
    if not names:
        return {}
    prefs, category = decisions.prefs, decisions.category
    window = None
    if prefs.digest_for(category) is None:
        throttle = digests.throttle_of(category)
        # A scheduled send is not counted against the window it was queued in.
        if throttle is None or not throttled or when is not None:
            return {}
        window = digests.over_throttle(
            user_id=notification.user_id, category=category, throttle=throttle
        )
        if window is None:
            return {}
    return gather_for(
        notification_id=notification.id,
        user_id=notification.user_id,
        prefs=prefs,
        category=category,
        names=names,
        lane=lane,
        when=when,
        throttle_window=window,
    )


def gather_for(
    *,
    notification_id: uuid.UUID,
    user_id: int,
    prefs: preferences.Preferences,
    category: str,
    names: list[str],
    lane: str,
    when: datetime | None,
    throttle_window: windows.Window | None = None,
) -> dict[str, int]:
    """Join the notification on names to the recipient's digest of category, or else to the
    carrier of throttle_window (the throttle window it was one too many for, counted by the
    caller); return the carrier delivery per channel joined (none: neither applies)."""
    digest = prefs.digest_for(category)
    if digest is not None:
        kind = digests.DIGEST_KIND
        zone = prefs.time_zone
        first = windows.window(digest, time_zone=zone, at=when)

        def next_window(end: datetime) -> windows.Window:
            return windows.window(digest, time_zone=zone, at=end)

    elif throttle_window is not None:
        kind = digests.THROTTLE_KIND
        first = throttle_window
        length = first.end - first.start

        def next_window(end: datetime) -> windows.Window:
            return windows.Window(end, end + length)

    else:
        return {}
    held = frozenset(name for name in names if prefs.holds(name))
    quiet_hours = None
    if held:
        quiet_hours = digests.Quiet(prefs.time_zone, prefs.quiet_start, prefs.quiet_end, held)
    return digests.join(
        notification_id=notification_id,
        user_id=user_id,
        category=category,
        kind=kind,
        channels=names,
        first=first,
        next_window=next_window,
        lane=lane,
        quiet_hours=quiet_hours,
        version=prefs.version,
    )


def cancel_notifications(*, key: str, user=None) -> CancelCounts:
    """Withdraw every delivery under cancel_key key (of user's notifications only, when
    given) that no drain has claimed yet; say how many were cancelled, how many were being
    sent at that moment (too late), and how many had finished already; and, apart from the
    cancelled, how many were cancelled after an earlier claim ended without a report, which
    may have sent them (maybe_sent).

    Two statements in one transaction (outbox.cancel_key: the open digests locked, then the
    deliveries cancelled and the items withdrawn): a delivery is either claimed by a drain or
    cancelled, never both."""
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


def add_channels(
    *,
    notification: Notification,
    channels: Iterable[str],
    priority: str = DEFAULT_LANE,
    send_at: datetime | None = None,
) -> Enqueued:
    """Queue an existing notification on more channels, its recipient's preferences kept as
    send_notification() keeps them; a channel it has already is left as it is, and out of
    the result.

    The unique (notification, channel) constraint makes this safe to call twice, even from
    two transactions at once (ON CONFLICT DO NOTHING); of two calls adding the same channel at
    the same moment, both may report it, and one row is written.
    """
    lane, when = _lane(priority), _send_at(send_at)
    names = _channels(channels)
    kind = notification.message_key
    if kind not in catalogue.MESSAGES:
        raise ValueError(f"The notification's message {kind!r} is no longer in the catalogue.")
    present = dict(notification.deliveries.values_list("channel", "status"))
    names = [n for n in names if n not in present]
    if not names:
        return Enqueued(notification=notification)
    reached = any(status != Status.SKIPPED for status in present.values())
    decisions = _decide(user=notification.user, kind=kind, names=names, when=when, reached=reached)
    with transaction.atomic():
        return _write(notification, decisions, lane=lane, when=when, throttled=False)
