"""Digests and throttles: notifications gathered into one delivery, the carrier.

A carrier is an ordinary delivery row (claimed, fenced, retried, reaped like any other) of a
notification whose type is "digest". There is one per recipient, category, channel and window
(its notification's id is derived from them, and a delivery is unique per notification and
channel), due when the window ends. A notification enqueued for a recipient who takes its
category as a digest, or past its throttle, joins the open carrier of its window inside the
caller's transaction: a DigestItem row beside the carrier, which the drain reads when it sends.

Joining locks the carrier FOR SHARE and only while it is pending and was never claimed
(attempts = 0). The claim takes its rows FOR UPDATE SKIP LOCKED, so it passes over a carrier
that an uncommitted transaction is joining and takes it at the next tick, items and all; and a
join that comes after the claim finds the carrier claimed and joins the next window instead.
So a carrier's items are fixed by its first claim (a retry sends the same ones), and a
notification is in exactly one carrier.

Windows are wall-clock ones in the recipient's time zone ("daily at 09:00 in Europe/Berlin"),
turned into instants by the database, on the same clock the claim reads: on the night the
clocks change, a daily window lasts 23 or 25 hours and still ends at 09:00.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.utils import formats, timezone, translation
from django.utils.translation import gettext, ngettext

from recipients import catalogue, quiet
from recipients.windows import Window

# The type (and message key) of a carrier's notification. Not in the catalogue's MESSAGES: no
# sender queues one; enqueue does, on the recipient's behalf.
DIGEST = "digest"

# What a carrier gathers: a recipient's digest window, or the overflow of a throttle window.
DIGEST_KIND = "digest"
THROTTLE_KIND = "throttle"

# The items a carrier lists, newest first; the rest are counted ("and 12 more").
SHOWN_ITEMS = 20

# How many windows a join walks forward when the carriers it finds are claimed already: one
# is enough unless a window ends while the caller's transaction is open, two if a short
# throttle window ends too; past that something else is wrong.
_MAX_WINDOWS = 4

_NAMESPACE = uuid.UUID("7c1a0f55-3d1e-4c55-9d57-8b4f2b8e1d0a")


# The recipient's count of one-by-one sends of a category in the throttle window now() falls
# in (windows of $seconds, counted from the epoch), one more; the window's end with it. The row
# stays locked until the caller commits, so two transactions at once count one after the other.
THROTTLE_SQL = """
INSERT INTO notifications.throttle_counts AS t (user_id, category, window_end, sent)
VALUES (
    %(user)s,
    %(category)s,
    to_timestamp((floor(extract(epoch FROM now()) / %(seconds)s) + 1) * %(seconds)s),
    1
)
ON CONFLICT (user_id, category, window_end) DO UPDATE SET sent = t.sent + 1
RETURNING t.sent, t.window_end
""".strip()


@dataclass(frozen=True)
class Throttle:
    limit: int
    seconds: int


def throttle_of(category: str) -> Throttle | None:
    """The throttle of category: NOTIFICATION_THROTTLES, else the site's default; None for a
    required category, one no recipient chooses (a showcase's own rows), or a limit of 0."""
    known = catalogue.CATEGORIES[category]
    if known.required or not known.choosable:
        return None
    limit, seconds = settings.NOTIFICATION_THROTTLES.get(
        category, (settings.NOTIFICATION_THROTTLE_LIMIT, settings.NOTIFICATION_THROTTLE_SECONDS)
    )
    return Throttle(limit, seconds) if limit else None


def over_throttle(*, user_id: int, category: str, throttle: Throttle) -> Window | None:
    """Count one more send of category to user_id; return the throttle window when it is one
    too many (the notification folds into that window's carrier), else None."""
    with connection.cursor() as cursor:
        cursor.execute(
            THROTTLE_SQL, {"user": user_id, "category": category, "seconds": throttle.seconds}
        )
        sent, end = cursor.fetchone()
    if sent <= throttle.limit:
        return None
    return Window(end - timedelta(seconds=throttle.seconds), end)


# A window's carrier, made if it is not there yet: its notification, and a pending delivery on
# each channel, due when given (the window's end, or later where quiet hours hold it). Both
# inserts leave an existing row as it is, claimed or not.
CARRIER_SQL = """
WITH carrier AS (
    INSERT INTO notifications.notifications
        (id, user_id, type, message_key, message_params, action_url, cancel_key)
    VALUES (%(id)s, %(user)s, %(type)s, %(type)s, %(params)s::jsonb, '', '')
    ON CONFLICT (id) DO NOTHING
)
INSERT INTO notifications.notification_deliveries
    (notification_id, channel, lane, next_attempt_at, held_until, held_from, decided_version)
SELECT %(id)s, c.channel, %(lane)s, c.due, c.held_until,
       CASE WHEN c.held_until IS NOT NULL THEN %(end)s::timestamptz END, %(version)s
FROM jsonb_to_recordset(%(channels)s::jsonb)
    AS c(channel text, due timestamptz, held_until timestamptz)
ON CONFLICT (notification_id, channel) DO NOTHING
""".strip()

# The notification joins the carrier's deliveries that are still open: pending and never
# claimed, locked FOR SHARE so no claim takes them before the caller commits (the claim skips
# a locked row), while other joins go on at the same time. The channels it joined come back.
JOIN_SQL = """
WITH open AS (
    SELECT id, channel
    FROM notifications.notification_deliveries
    WHERE notification_id = %(carrier)s
      AND channel = ANY(%(channels)s::text[])
      AND status = 'pending'
      AND attempts = 0
    FOR SHARE
),
joined AS (
    INSERT INTO notifications.digest_items (carrier_id, notification_id)
    SELECT id, %(notification)s FROM open
    ON CONFLICT DO NOTHING
)
SELECT channel, id FROM open
""".strip()


def carrier_id(*, user_id: int, kind: str, category: str, end: datetime) -> uuid.UUID:
    """The id of the carrier notification of this window: the same for every transaction
    that asks, so they all find one row."""
    return uuid.uuid5(_NAMESPACE, f"{user_id}:{kind}:{category}:{end.timestamp():.0f}")


@dataclass(frozen=True)
class Quiet:
    """The recipient's quiet hours, for the channels they hold."""

    time_zone: str
    start: object
    end: object
    held: frozenset[str]


def join(
    *,
    notification_id: uuid.UUID,
    user_id: int,
    category: str,
    kind: str,
    channels: Sequence[str],
    first: Window,
    next_window,
    lane: str,
    quiet_hours: Quiet | None = None,
    version: int = 0,
) -> dict[str, int]:
    """Add the notification to the carriers of its window on channels; return the carrier
    delivery's id per channel. A carrier claimed already sends the window's items without
    it, so it joins the next window's (next_window(end) gives it) instead. version is the
    recipient's choices version the join was decided under, kept by a carrier it makes."""
    joined: dict[str, int] = {}
    left = list(channels)
    current = first
    for _ in range(_MAX_WINDOWS):
        carrier = carrier_id(user_id=user_id, kind=kind, category=category, end=current.end)
        rows = []
        for name in left:
            held = None
            if quiet_hours is not None and name in quiet_hours.held:
                held = quiet.held_until(
                    time_zone=quiet_hours.time_zone,
                    start=quiet_hours.start,
                    end=quiet_hours.end,
                    due=current.end,
                )
            due = held or current.end
            rows.append(
                {
                    "channel": name,
                    "due": due.isoformat(),
                    "held_until": held.isoformat() if held else None,
                }
            )
        params = {
            "category": category,
            "kind": kind,
            "since": current.start.isoformat(),
            "until": current.end.isoformat(),
        }
        with connection.cursor() as cursor:
            cursor.execute(
                CARRIER_SQL,
                {
                    "id": carrier,
                    "user": user_id,
                    "type": DIGEST,
                    "params": json.dumps(params),
                    "lane": lane,
                    "end": current.end,
                    "version": version,
                    "channels": json.dumps(rows),
                },
            )
            cursor.execute(
                JOIN_SQL,
                {"carrier": carrier, "channels": left, "notification": notification_id},
            )
            found = dict(cursor.fetchall())
        joined.update(found)
        left = [name for name in left if name not in found]
        if not left:
            return joined
        current = next_window(current.end)
    raise RuntimeError(
        f"Notification {notification_id}: the carriers of {_MAX_WINDOWS} windows in a row were "
        f"claimed already on {', '.join(left)}."
    )


# join() for many notifications at once (a broadcast's chunk): every window's carrier made if
# missing, in one statement, then every notification joined to its carrier's open deliveries in
# another. The open deliveries are locked FOR SHARE in id order, the order cancel_notifications
# locks carriers in, so the two never wait for each other in a circle.
CARRIERS_SQL = """
WITH c AS (
    SELECT *
    FROM jsonb_to_recordset(%(rows)s::jsonb)
        AS c(id uuid, user_id integer, params jsonb, lane text, "end" timestamptz,
             version bigint, channel text, due timestamptz, held_until timestamptz)
),
carriers AS (
    INSERT INTO notifications.notifications
        (id, user_id, type, message_key, message_params, action_url, cancel_key)
    SELECT DISTINCT ON (id) id, user_id, %(type)s, %(type)s, params, '', ''
    FROM c
    ORDER BY id
    ON CONFLICT (id) DO NOTHING
)
INSERT INTO notifications.notification_deliveries
    (notification_id, channel, lane, next_attempt_at, held_until, held_from, decided_version)
SELECT id, channel, lane, due, held_until,
       CASE WHEN held_until IS NOT NULL THEN "end" END, version
FROM c
ON CONFLICT (notification_id, channel) DO NOTHING
""".strip()

JOIN_EACH_SQL = """
WITH wanted AS (
    SELECT *
    FROM jsonb_to_recordset(%(rows)s::jsonb) AS w(carrier uuid, channel text, notification uuid)
),
-- Each carrier's delivery by the unique (notification, channel) index, one probe a row: joined
-- to the recordset instead, whose size the planner cannot know, it may scan the whole table.
found AS MATERIALIZED (
    SELECT d.id, w.notification
    FROM wanted AS w
    CROSS JOIN LATERAL (
        SELECT id
        FROM notifications.notification_deliveries
        WHERE notification_id = w.carrier AND channel = w.channel
    ) AS d
),
open AS (
    SELECT d.id, d.channel
    FROM notifications.notification_deliveries AS d
    WHERE d.id = ANY(ARRAY(SELECT id FROM found))
      AND d.status = 'pending'
      AND d.attempts = 0
    ORDER BY d.id
    FOR SHARE
),
joined AS (
    INSERT INTO notifications.digest_items (carrier_id, notification_id)
    SELECT open.id, found.notification
    FROM open
    JOIN found ON found.id = open.id
    ON CONFLICT DO NOTHING
)
SELECT found.notification, open.channel, open.id
FROM open
JOIN found ON found.id = open.id
""".strip()


@dataclass(frozen=True)
class Joining:
    """One notification to join to the carriers of its first window, as join() takes it."""

    notification_id: uuid.UUID
    user_id: int
    category: str
    kind: str
    channels: tuple[str, ...]
    window: Window
    lane: str
    quiet_hours: Quiet | None = None
    version: int = 0


def join_each(joinings: Sequence[Joining]) -> dict[uuid.UUID, dict[str, int]]:
    """join() for each of joinings, in the first window only, in three statements however
    many: the quiet hours' ends, the carriers, the joins. Returns the carrier delivery per
    channel joined, per notification; a channel whose carrier was claimed already is left
    out, for the caller to join through join(), which walks on to the next window."""
    if not joinings:
        return {}
    asked = {}
    for joining in joinings:
        quiet_hours = joining.quiet_hours
        if quiet_hours is None:
            continue
        for name in joining.channels:
            if name in quiet_hours.held:
                hours = quiet.Hours(quiet_hours.time_zone, quiet_hours.start, quiet_hours.end)
                asked.setdefault((hours, joining.window.end), None)
    ends = dict(zip(asked, quiet.held_until_each(list(asked)), strict=True)) if asked else {}
    carriers, joins = [], []
    for joining in joinings:
        end = joining.window.end
        carrier = carrier_id(
            user_id=joining.user_id, kind=joining.kind, category=joining.category, end=end
        )
        params = {
            "category": joining.category,
            "kind": joining.kind,
            "since": joining.window.start.isoformat(),
            "until": end.isoformat(),
        }
        quiet_hours = joining.quiet_hours
        for name in joining.channels:
            held = None
            if quiet_hours is not None and name in quiet_hours.held:
                hours = quiet.Hours(quiet_hours.time_zone, quiet_hours.start, quiet_hours.end)
                held = ends[(hours, end)]
            carriers.append(
                {
                    "id": str(carrier),
                    "user_id": joining.user_id,
                    "params": params,
                    "lane": joining.lane,
                    "end": end.isoformat(),
                    "version": joining.version,
                    "channel": name,
                    "due": (held or end).isoformat(),
                    "held_until": held.isoformat() if held else None,
                }
            )
            joins.append(
                {
                    "carrier": str(carrier),
                    "channel": name,
                    "notification": str(joining.notification_id),
                }
            )
    joined: dict[uuid.UUID, dict[str, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(CARRIERS_SQL, {"rows": json.dumps(carriers), "type": DIGEST})
        cursor.execute(JOIN_EACH_SQL, {"rows": json.dumps(joins)})
        for notification, channel, delivery in cursor.fetchall():
            joined.setdefault(notification, {})[channel] = delivery
    return joined


# A batch of carriers' items for the drain: per carrier the count, and the newest SHOWN_ITEMS
# with their messages, newest first.
ITEMS_SQL = f"""
SELECT carrier_id, total, notification_id, message_key, message_params::text, created_at
FROM (
    SELECT i.carrier_id,
           count(*) OVER (PARTITION BY i.carrier_id) AS total,
           row_number() OVER (
               PARTITION BY i.carrier_id ORDER BY i.joined_at DESC, n.id DESC
           ) AS place,
           n.id AS notification_id,
           coalesce(nullif(n.message_key, ''), n.type) AS message_key,
           n.message_params,
           n.created_at
    FROM notifications.digest_items AS i
    JOIN notifications.notifications AS n ON n.id = i.notification_id
    WHERE i.carrier_id = ANY(%(carriers)s::bigint[])
) AS ranked
WHERE place <= {SHOWN_ITEMS}
ORDER BY carrier_id, place
""".strip()


class Item(NamedTuple):
    """One notification a carrier lists, as it was queued."""

    notification_id: uuid.UUID
    message_key: str
    params: dict
    created_at: datetime


@dataclass(frozen=True)
class Items:
    """A carrier's items as it sends them: how many in all, and the newest, newest first."""

    total: int
    newest: tuple[Item, ...]


def items_of(carrier_ids: Sequence[int]) -> dict[int, Items]:
    """The items of these carriers, in one query (a carrier without any is left out)."""
    if not carrier_ids:
        return {}
    gathered: dict[int, list[Item]] = {}
    totals: dict[int, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(ITEMS_SQL, {"carriers": list(carrier_ids)})
        for carrier, total, notification, key, params, created in cursor.fetchall():
            totals[carrier] = total
            item = Item(notification, key, json.loads(params), created)
            gathered.setdefault(carrier, []).append(item)
    return {c: Items(totals[c], tuple(gathered[c])) for c in gathered}


@dataclass(frozen=True)
class RenderedDigest:
    subject: str
    body: str
    # What a channel that sends structured data (a webhook) gets: the same, as data
    # (docs/digests.md describes it).
    params: dict


# A window at most this long is read on a clock: an hourly digest, and a throttle window of
# the default hour, list their items (and say since when) by the time alone; a longer one (a
# daily or weekly digest, a throttle of a day) by date and time.
_TIME_ONLY = timedelta(hours=3)
# Which digest a window is, by its length: hourly ones last an hour, daily ones 23 to 25
# hours (the clocks may change that night), weekly ones a week.
_DAILY_AT_MOST = timedelta(hours=26)


def _subject(*, kind: str, length: timedelta, count: int, category: str) -> str:
    values = {"count": count, "category": category}
    if kind == THROTTLE_KIND:
        return (
            ngettext(
                "%(count)d more notification in “%(category)s”",
                "%(count)d more notifications in “%(category)s”",
                count,
            )
            % values
        )
    if length <= _TIME_ONLY:
        return (
            ngettext(
                "Your hourly digest: %(count)d notification in “%(category)s”",
                "Your hourly digest: %(count)d notifications in “%(category)s”",
                count,
            )
            % values
        )
    if length <= _DAILY_AT_MOST:
        return (
            ngettext(
                "Your daily digest: %(count)d notification in “%(category)s”",
                "Your daily digest: %(count)d notifications in “%(category)s”",
                count,
            )
            % values
        )
    return (
        ngettext(
            "Your weekly digest: %(count)d notification in “%(category)s”",
            "Your weekly digest: %(count)d notifications in “%(category)s”",
            count,
        )
        % values
    )


def _heading(*, kind: str, count: int, category: str, since: str) -> str:
    values = {"count": count, "category": category, "since": since}
    if kind == THROTTLE_KIND:
        return (
            ngettext(
                "%(count)d more notification in “%(category)s” since %(since)s, gathered into "
                "one message:",
                "%(count)d more notifications in “%(category)s” since %(since)s, gathered into "
                "one message:",
                count,
            )
            % values
        )
    return (
        ngettext(
            "%(count)d notification in “%(category)s” since %(since)s:",
            "%(count)d notifications in “%(category)s” since %(since)s:",
            count,
        )
        % values
    )


def render(*, params: Mapping, items: Items, language: str, time_zone: str) -> RenderedDigest:
    """A carrier as its recipient reads it, in language: a count, the newest items' subjects
    (newest first) and how many more there are; times on the recipient's clock."""
    category = catalogue.CATEGORIES.get(params.get("category", ""))
    kind = params.get("kind", DIGEST_KIND)
    since = datetime.fromisoformat(params["since"])
    until = datetime.fromisoformat(params["until"]) if params.get("until") else since
    length = until - since
    with translation.override(language), timezone.override(_zone(time_zone)):
        if length <= _TIME_ONLY:

            def stamp(moment: datetime) -> str:
                return formats.time_format(timezone.localtime(moment), "TIME_FORMAT")

        else:

            def stamp(moment: datetime) -> str:
                return formats.date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT")

        label = str(category.label) if category else params.get("category", "")
        count = items.total
        subject = _subject(kind=kind, length=length, count=count, category=label)
        heading = _heading(kind=kind, count=count, category=label, since=stamp(since))
        lines, listed = [heading, ""], []
        for item in items.newest:
            try:
                title = catalogue.render(
                    key=item.message_key, params=item.params, language=language
                ).subject
            except catalogue.RENDER_ERRORS:
                title = gettext("A notification that can no longer be shown")
            lines.append(f"• {stamp(item.created_at)} {title}")
            listed.append(
                {
                    "id": str(item.notification_id),
                    "type": item.message_key,
                    "subject": title,
                    "created_at": item.created_at.isoformat(),
                }
            )
        more = count - len(items.newest)
        if more > 0:
            lines += [
                "",
                ngettext("…and %(count)d more.", "…and %(count)d more.", more) % {"count": more},
            ]
    data = {
        "kind": kind,
        "category": params.get("category", ""),
        "since": params["since"],
        "until": params.get("until", ""),
        "count": count,
        "items": listed,
    }
    return RenderedDigest(subject=subject, body="\n".join(lines), params=data)


def _zone(name: str):
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")
