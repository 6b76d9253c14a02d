"""Broadcasts: one call, every member of an audience, each recipient decided by their own choices.

send_broadcast() writes, in the caller's transaction, the broadcast and its recipients' ids in
chunks (BROADCAST_CHUNK_SIZE): the recipients are the audience's members when the call runs,
and a member added after it is not included. Nothing is decided yet. After the commit the
drains expand the chunks, one each between their batches: a chunk is claimed like a delivery
(marked expanding, its attempts bumped as a fence) and expanded in one transaction that ends by
marking it done under that fence, so a drain killed half-way leaves nothing behind, and the
reaper puts its chunk back once the lease has run out. Each recipient's notification is keyed by
(broadcast, user) and each delivery by (notification, channel), so a chunk expanded twice still
makes each row once.

A chunk is decided by set-based statements, not a call per recipient: DECIDE_SQL reads, for
every recipient of the chunk at once, what send_notification's _decide reads for one (their
addresses, their choice for the category on each channel, the category's defaults and its
required rule, their quiet hours in their time zone) and says, per recipient and channel,
queued, held until when, or skipped and why. The throttle is counted for the whole chunk in one
statement. The recipients whose rows join a carrier (they take the category as a digest, or
the broadcast is one past their throttle) are joined together too (digests.join_each); only one
whose carrier a drain claimed at that moment is joined alone, through the same code as a single
send, which moves on to the next window.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.db.models import QuerySet

from notifications import digests, enqueue, outbox, wakeup
from notifications.models import (
    DEFAULT_LANE,
    Broadcast,
    ChunkStatus,
    Status,
)
from notifications.outbox import CancelCounts
from recipients import audiences, catalogue, preferences, windows
from recipients.models import Audience
from recipients.windows import Window
from transports.base import AddressSource

logger = logging.getLogger(__name__)


# --- Sending ---------------------------------------------------------------------------------

# The recipients, numbered in id order, in chunks of %(size)s: one statement however many, and
# the broadcast's count of them with it. {query} is the members' queryset as SQL (positional
# placeholders, as Django writes it).
SNAPSHOT_SQL = """
WITH numbered AS (
    SELECT chosen.id, row_number() OVER (ORDER BY chosen.id) - 1 AS place
    FROM ({query}) AS chosen(id)
),
chunks AS (
    INSERT INTO notifications.broadcast_chunks
        (broadcast_id, number, user_ids, lane, status, attempts, attempt_base, error)
    SELECT %s, place / %s, array_agg(id ORDER BY id), %s, 'pending', 0, 0, ''
    FROM numbered
    GROUP BY place / %s
    RETURNING cardinality(user_ids) AS size
)
UPDATE notifications.broadcasts
SET recipients = (SELECT coalesce(sum(size), 0) FROM chunks)
WHERE id = %s
RETURNING recipients
"""


def _audience(audience: Any) -> tuple[Audience | None, str, QuerySet]:
    """The audience row (if any), its label and its members, for what send_broadcast took."""
    users = get_user_model()._default_manager
    if isinstance(audience, str):
        found = Audience.objects.filter(key=audience).first()
        if found is None:
            raise ValueError(f"No audience has the key {audience!r}.")
        audience = found
    if isinstance(audience, Audience):
        if audience.pk is None:
            raise ValueError("The audience must be saved before it is broadcast to.")
        return audience, audience.name[:200], audiences.members(audience)
    if isinstance(audience, QuerySet):
        if audience.model is not get_user_model():
            raise TypeError(
                f"audience must be a queryset of users, not of {audience.model.__name__}."
            )
        return None, "a list of users", users.filter(is_active=True, pk__in=audience.values("pk"))
    if isinstance(audience, Iterable) and not isinstance(audience, bytes | Mapping):
        ids = []
        for user in audience:
            user_id = getattr(user, "pk", user)
            if isinstance(user_id, bool) or not isinstance(user_id, int):
                raise TypeError(f"audience lists users or user ids; {user!r} is neither.")
            ids.append(user_id)
        return None, "a list of users", users.filter(is_active=True, pk__in=ids)
    raise TypeError(
        "audience must be an Audience, an audience's key, a queryset of users or a list of "
        f"users, not {type(audience).__name__}."
    )


def send_broadcast(
    *,
    audience,
    type: str,  # noqa: A002 - the column's name
    params: Mapping[str, Any] | None = None,
    channels: Iterable[str] | None = None,
    action_url: str = "",
    priority: str = DEFAULT_LANE,
    send_at: datetime | None = None,
    cancel_key: str = "",
) -> Broadcast:
    """Queue one notification for every member of audience (an Audience, its key, a queryset
    of users or a list of users or ids; only active users receive), and return the broadcast
    at once: the drains expand it after the caller commits.

    Each recipient gets what send_notification(user=…, type=…, …) with the same arguments
    would give them, decided when their chunk is expanded: their own notification (in their
    inbox, in their language), a delivery per channel queued, held by their quiet hours,
    joined to their digest or throttle, or skipped with its reason. The recipients are the
    members as this call finds them; the broadcast does not follow the audience after it.

    Runs inside the caller's transaction when there is one: a rollback leaves no broadcast.
    cancel_broadcast() withdraws what no drain has claimed yet.
    """
    kind, params, names, lane, when, key = enqueue.checked(
        kind=type,
        params=params,
        channels=channels,
        priority=priority,
        send_at=send_at,
        cancel_key=cancel_key,
    )
    if not isinstance(action_url, str) or len(action_url) > 500:
        raise ValueError("action_url must be a string of at most 500 characters.")
    row, label, members = _audience(audience)
    query, query_params = members.order_by().values("pk").query.sql_with_params()
    size = settings.BROADCAST_CHUNK_SIZE
    with transaction.atomic():
        broadcast = Broadcast.objects.create(
            audience=row,
            audience_label=label,
            type=kind,
            message_params=params,
            channels=names,
            action_url=action_url,
            lane=lane,
            send_at=when,
            cancel_key=key,
        )
        with connection.cursor() as cursor:
            cursor.execute(
                SNAPSHOT_SQL.format(query=query),
                (*query_params, broadcast.pk, size, lane, size, broadcast.pk),
            )
            (broadcast.recipients,) = cursor.fetchone()
    if broadcast.recipients:
        transaction.on_commit(wakeup.request_wake, robust=True)
    return broadcast


# --- Expanding -------------------------------------------------------------------------------

# One chunk, the highest lane's first, then the oldest: marked expanding and its fence bumped.
# SKIP LOCKED: two drains never wait for each other, and never take the same chunk.
CLAIM_CHUNK_SQL = """
UPDATE notifications.broadcast_chunks AS c
SET status = 'expanding', attempts = c.attempts + 1, claimed_at = now()
WHERE c.id = (
    SELECT id FROM notifications.broadcast_chunks
    WHERE status = 'pending'
    ORDER BY array_position(%(lanes)s::text[], lane::text), id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING c.id, c.broadcast_id, c.attempts, c.user_ids
""".strip()

# The broadcast, locked FOR SHARE while its chunk is expanded: cancel_broadcast's UPDATE waits
# for every expansion under way, and an expansion after it finds it cancelled.
BROADCAST_SQL = """
SELECT type, message_params::text, channels::text, action_url, lane, send_at, cancel_key,
       cancelled_at IS NOT NULL
FROM notifications.broadcasts
WHERE id = %(broadcast)s
FOR SHARE
""".strip()

# The chunk's end, under its fence: none if the reaper put it back and another drain claimed
# it meanwhile (that drain's expansion is the one that counts; this one rolls back).
FINISH_CHUNK_SQL = """
UPDATE notifications.broadcast_chunks
SET status = %(status)s,
    expanded_at = CASE WHEN %(status)s = 'done' THEN now() END,
    error = %(error)s
WHERE id = %(chunk)s AND attempts = %(fence)s AND status = 'expanding'
""".strip()

# A chunk whose drain went quiet past the lease goes back, however often: its expansion is one
# transaction, so a drain killed in it left nothing behind, and a recipient is never given up
# on because drains died (only an expansion that fails, FAIL_CHUNK_SQL, counts against the
# budget). A chunk of a broadcast cancelled meanwhile is cancelled instead.
RECLAIM_CHUNKS_SQL = """
UPDATE notifications.broadcast_chunks AS c
SET status = CASE WHEN b.cancelled_at IS NULL THEN 'pending' ELSE 'cancelled' END,
    error = 'The drain expanding this chunk did not finish within its lease.'
FROM notifications.broadcasts AS b
WHERE b.id = c.broadcast_id
  AND c.status = 'expanding'
  AND c.claimed_at < now() - make_interval(secs => %(lease_seconds)s)
""".strip()

# What send_notification's _decide decides for one recipient, for all of a chunk's at once:
# per recipient and channel, its place in their channels (the required rule keeps the first),
# why it is skipped (null: queued), until when their quiet hours hold it, their choices'
# version, and whether they take the category as a digest. {users} is the user model's table.
# With no channels named, a recipient's own are those _own_channels gives: email when they
# have an address, those they have an address row on (by name), the account's (the inbox);
# with none of those, the first email channel, skipped (no address).
DECIDE_SQL = """
WITH offered AS (
    SELECT *
    FROM jsonb_to_recordset(%(channels)s::jsonb)
        AS c(name text, source text, place integer, default_on boolean, quiet text)
),
members AS (
    SELECT u.id AS user_id, coalesce(u.email, '') <> '' AS has_email
    FROM {users} AS u
    WHERE u.id = ANY(%(users)s::integer[])
),
addressed AS (
    SELECT user_id, channel, bool_or(is_active) AS active
    FROM notifications.channel_addresses
    WHERE user_id = ANY(%(users)s::integer[])
    GROUP BY user_id, channel
),
candidates AS (
    SELECT m.user_id, m.has_email, o.name, o.source, o.place, o.default_on, o.quiet,
           a.active, a.user_id IS NOT NULL AS has_row,
           CASE
               WHEN %(named)s THEN 0
               WHEN o.source = 'email' AND m.has_email THEN 0
               WHEN a.user_id IS NOT NULL THEN 1
               WHEN o.source = 'account' THEN 2
           END AS grp
    FROM members AS m
    CROSS JOIN offered AS o
    LEFT JOIN addressed AS a ON a.user_id = m.user_id AND a.channel = o.name
),
chosen AS (
    SELECT * FROM candidates WHERE grp IS NOT NULL
    UNION ALL
    -- Nowhere to reach them: the first email channel, to say so.
    SELECT c.* FROM candidates AS c
    WHERE NOT %(named)s AND c.name = %(fallback)s
      AND NOT EXISTS (
          SELECT FROM candidates AS k WHERE k.user_id = c.user_id AND k.grp IS NOT NULL
      )
),
reasoned AS (
    SELECT c.user_id, c.name,
           row_number() OVER (
               PARTITION BY c.user_id
               ORDER BY coalesce(c.grp, 0),
                        CASE WHEN c.grp = 1 THEN c.name END COLLATE "C",
                        c.place
           ) AS ord,
           c.quiet,
           coalesce(
               CASE c.source
                   WHEN 'email' THEN CASE WHEN c.has_email THEN NULL ELSE 'no_address' END
                   WHEN 'channel_address' THEN CASE
                       WHEN c.active THEN NULL
                       WHEN c.has_row THEN 'channel_off'
                       ELSE 'no_address'
                   END
               END,
               CASE WHEN NOT coalesce(p.enabled, c.default_on) THEN 'opted_out' END
           ) AS reason
    FROM chosen AS c
    LEFT JOIN notifications.channel_preferences AS p
        ON p.user_id = c.user_id AND p.category = %(category)s AND p.channel = c.name
),
ruled AS (
    SELECT r.*,
           CASE
               WHEN %(required)s
                    AND bool_and(r.reason IS NOT NULL) OVER (PARTITION BY r.user_id)
                    AND r.reason = 'opted_out'
                    AND r.ord = min(r.ord) FILTER (WHERE r.reason = 'opted_out')
                        OVER (PARTITION BY r.user_id)
               THEN NULL
               ELSE r.reason
           END AS decided
    FROM reasoned AS r
),
zoned AS (
    SELECT s.user_id, s.quiet_start AS start, s.quiet_end AS "end", s.quiet_email, z.zone,
           GREATEST(now(), coalesce(%(when)s::timestamptz, now())) AT TIME ZONE z.zone
               AS local
    FROM notifications.recipients AS s
    CROSS JOIN LATERAL (
        SELECT CASE WHEN s.time_zone = ANY(%(zones)s::text[]) THEN s.time_zone ELSE 'UTC' END
    ) AS z(zone)
    WHERE s.user_id = ANY(%(users)s::integer[])
      AND s.quiet_start IS NOT NULL
      AND s.quiet_end IS NOT NULL
      AND NOT %(required)s
),
quiet AS (
    SELECT user_id, quiet_email, CASE
        WHEN start < "end" THEN
            CASE WHEN local::time >= start AND local::time < "end"
                THEN (local::date + "end") AT TIME ZONE zone END
        ELSE
            CASE
                WHEN local::time >= start THEN (local::date + 1 + "end") AT TIME ZONE zone
                WHEN local::time < "end" THEN (local::date + "end") AT TIME ZONE zone
            END
    END AS held_until
    FROM zoned
)
SELECT r.user_id, r.name, r.decided,
       CASE
           WHEN r.decided IS NULL
                AND (r.quiet = 'always' OR (r.quiet = 'when_asked' AND q.quiet_email))
           THEN q.held_until
       END,
       coalesce((SELECT version FROM notifications.choices_versions AS v
                 WHERE v.user_id = r.user_id), 0),
       NOT %(required)s AND EXISTS (
           SELECT FROM notifications.digest_choices AS d
           WHERE d.user_id = r.user_id AND d.category = %(category)s
       )
FROM ruled AS r
LEFT JOIN quiet AS q ON q.user_id = r.user_id
ORDER BY r.user_id, r.ord
"""

# Every recipient's one-more in the category's throttle window now() falls in, for the whole
# chunk in one statement, in user order (two statements counting the same users lock their
# rows in the same order).
THROTTLE_EACH_SQL = """
INSERT INTO notifications.throttle_counts AS t (user_id, category, window_end, sent)
SELECT u, %(category)s,
       to_timestamp((floor(extract(epoch FROM now()) / %(seconds)s) + 1) * %(seconds)s), 1
FROM unnest(%(users)s::integer[]) AS u
ORDER BY u
ON CONFLICT (user_id, category, window_end) DO UPDATE SET sent = t.sent + 1
RETURNING t.user_id, t.sent, t.window_end
""".strip()

# One notification a recipient, keyed by (broadcast, user): one already made is left alone
# and not returned.
NOTIFY_EACH_SQL = """
INSERT INTO notifications.notifications
    (id, user_id, type, message_key, message_params, action_url, cancel_key, broadcast_id)
SELECT gen_random_uuid(), u, %(kind)s, %(kind)s, %(params)s::jsonb, %(action_url)s,
       %(cancel_key)s, %(broadcast)s
FROM unnest(%(users)s::integer[]) AS u
ON CONFLICT (broadcast_id, user_id) WHERE broadcast_id IS NOT NULL DO NOTHING
RETURNING user_id, id
""".strip()

# Their deliveries, as enqueue._write writes one recipient's: a queued row due at send_at (or
# now), a held one at the end of the quiet window, a skipped one with its reason.
DELIVER_EACH_SQL = """
INSERT INTO notifications.notification_deliveries
    (notification_id, channel, lane, status, skip_reason, decided_version,
     next_attempt_at, held_until, held_from)
SELECT d.notification, d.channel, %(lane)s,
       CASE WHEN d.reason IS NULL THEN 'pending' ELSE 'skipped' END,
       coalesce(d.reason, ''), d.version,
       CASE
           WHEN d.held_until IS NOT NULL THEN d.held_until
           WHEN d.reason IS NULL THEN GREATEST(now(), %(when)s::timestamptz)
           ELSE now()
       END,
       d.held_until,
       CASE WHEN d.held_until IS NOT NULL THEN GREATEST(now(), %(when)s::timestamptz) END
FROM jsonb_to_recordset(%(rows)s::jsonb)
    AS d(notification uuid, channel text, reason text, held_until timestamptz, version bigint)
ON CONFLICT DO NOTHING
""".strip()


# For the rest of the chunk's transaction: no JIT. The planner cannot see how few rows
# DECIDE_SQL's inputs hold (it takes jsonb_to_recordset for 100 rows, and each ANY() array for
# a fraction of its table), so it estimates a chunk of 500 at a cost near 840,000, past
# jit_above_cost and both of JIT's thresholds for inlining and optimisation. PostgreSQL then
# compiles the statement each time it runs, 0.8 s on a two-core machine, to run it in 6 ms.
NO_JIT_SQL = "SET LOCAL jit = off"


@cache
def _zones() -> list[str]:
    """The time zones Python knows: a recipient's other than these is read as UTC, as
    recipients.quiet does for a single send."""
    return sorted(zoneinfo.available_timezones())


def _offered(names: list[str] | None, category: catalogue.Category) -> tuple[str, str | None]:
    """The channels DECIDE_SQL chooses from, as JSON, and the email channel it falls back on."""
    rows = []
    pool = names if names is not None else list(settings.DELIVERY_CHANNELS)
    fallback = None
    for place, name in enumerate(pool):
        source = enqueue._address_source(settings.DELIVERY_CHANNELS[name])
        if source == AddressSource.EMAIL and fallback is None:
            fallback = name
        channel_class = enqueue.import_string(settings.DELIVERY_CHANNELS[name])
        rows.append(
            {
                "name": name,
                "source": str(source),
                "place": place,
                "default_on": category.default_for(name),
                "quiet": str(channel_class.quiet_hours),
            }
        )
    return json.dumps(rows), fallback


@dataclass
class _Recipient:
    version: int = 0
    digest: bool = False
    # channel → (reason or None, held_until or None), in the recipient's order.
    rows: dict[str, tuple[str | None, datetime | None]] | None = None


@dataclass(frozen=True)
class Expanded:
    """What one chunk's expansion did: the recipients it made a notification for, and the
    deliveries it wrote queued (held ones included), skipped, and joined to a carrier."""

    broadcast_id: uuid.UUID
    recipients: int = 0
    queued: int = 0
    skipped: int = 0
    digested: int = 0
    cancelled: bool = False


class _FencedOff(Exception):
    """The chunk's lease ran out and another drain holds it now: roll back."""


def _decide(*, users: list[int], kind: str, names: list[str] | None, when) -> dict:
    category_name = catalogue.MESSAGES[kind].category
    category = catalogue.CATEGORIES[category_name]
    offered, fallback = _offered(names, category)
    table = connection.ops.quote_name(get_user_model()._meta.db_table)
    decided: dict[int, _Recipient] = {}
    with connection.cursor() as cursor:
        cursor.execute(NO_JIT_SQL)
        cursor.execute(
            DECIDE_SQL.format(users=table),
            {
                "users": users,
                "channels": offered,
                "named": names is not None,
                "fallback": fallback,
                "category": category_name,
                "required": category.required,
                "when": when,
                "zones": _zones(),
            },
        )
        for user_id, channel, reason, held_until, version, digest in cursor.fetchall():
            found = decided.get(user_id)
            if found is None:
                found = decided[user_id] = _Recipient(version, digest, {})
            found.rows[channel] = (reason, held_until)
    return decided


def _throttled(decided: dict[int, _Recipient], *, category: str, when) -> dict[int, Window]:
    """Count the broadcast against the throttle of each recipient it sends to on its own (not
    as a digest); return the window of each it is one too many for."""
    throttle = digests.throttle_of(category)
    if throttle is None or when is not None:
        return {}
    counted = sorted(
        user_id
        for user_id, found in decided.items()
        if not found.digest and any(reason is None for reason, _ in found.rows.values())
    )
    if not counted:
        return {}
    over = {}
    with connection.cursor() as cursor:
        cursor.execute(
            THROTTLE_EACH_SQL,
            {"users": counted, "category": category, "seconds": throttle.seconds},
        )
        for user_id, sent, end in cursor.fetchall():
            if sent > throttle.limit:
                over[user_id] = Window(end - timedelta(seconds=throttle.seconds), end)
    return over


def _gather(
    *,
    made: dict[int, uuid.UUID],
    decided: dict[int, _Recipient],
    over: dict[int, Window],
    kind: str,
    lane: str,
    when,
) -> dict[int, dict[str, int]]:
    """Join the recipients who take the category as a digest, or are past its throttle, to
    their carriers: all of the chunk's at once (digests.join_each), then, one by one through
    enqueue's own join, the few whose carrier was claimed meanwhile. Returns the channels
    joined per recipient."""
    category = catalogue.MESSAGES[kind].category
    wanted = [
        user_id
        for user_id, found in decided.items()
        if user_id in made
        and (found.digest or user_id in over)
        and any(reason is None for reason, _ in found.rows.values())
    ]
    if not wanted:
        return {}
    prefs = {
        user_id: chosen._replace(version=decided[user_id].version)
        for user_id, chosen in preferences.of_each(wanted).items()
    }
    windows_of: dict[tuple, Window] = {}
    joinings = []
    for user_id in wanted:
        chosen = prefs[user_id]
        names = [name for name, (reason, _) in decided[user_id].rows.items() if reason is None]
        digest = chosen.digest_for(category)
        if digest is not None:
            # One statement a window, not a recipient: most of a chunk share a few.
            key = (digest, chosen.time_zone)
            if key not in windows_of:
                windows_of[key] = windows.window(digest, time_zone=chosen.time_zone, at=when)
            gathered, window = digests.DIGEST_KIND, windows_of[key]
        elif user_id in over:
            gathered, window = digests.THROTTLE_KIND, over[user_id]
        else:
            continue  # their digest went since the chunk was decided: sent on its own
        held = frozenset(name for name in names if chosen.holds(name))
        quiet_hours = None
        if held:
            quiet_hours = digests.Quiet(
                chosen.time_zone, chosen.quiet_start, chosen.quiet_end, held
            )
        joinings.append(
            digests.Joining(
                notification_id=made[user_id],
                user_id=user_id,
                category=category,
                kind=gathered,
                channels=tuple(names),
                window=window,
                lane=lane,
                quiet_hours=quiet_hours,
                version=chosen.version,
            )
        )
    found = digests.join_each(joinings)
    joined = {}
    for joining in joinings:
        user_id = joining.user_id
        got = found.get(joining.notification_id, {})
        left = [name for name in joining.channels if name not in got]
        if left:
            # Its window's carrier was claimed already: the next window's, as a send does.
            got = {
                **got,
                **enqueue.gather_for(
                    notification_id=joining.notification_id,
                    user_id=user_id,
                    prefs=prefs[user_id],
                    category=category,
                    names=left,
                    lane=lane,
                    when=when,
                    throttle_window=over.get(user_id),
                ),
            }
        joined[user_id] = got
    return joined


def _expand(broadcast_id: uuid.UUID, users: list[int], *, params) -> Expanded:
    kind, message_params, names, action_url, lane, when, key = params
    if kind not in catalogue.MESSAGES:
        raise ValueError(f"The broadcast's message {kind!r} is no longer in the catalogue.")
    decided = _decide(users=users, kind=kind, names=names, when=when)
    if not decided:
        return Expanded(broadcast_id)
    category = catalogue.MESSAGES[kind].category
    over = _throttled(decided, category=category, when=when)
    with connection.cursor() as cursor:
        cursor.execute(
            NOTIFY_EACH_SQL,
            {
                "users": sorted(decided),
                "kind": kind,
                "params": message_params,
                "action_url": action_url,
                "cancel_key": key,
                "broadcast": broadcast_id,
            },
        )
        made = dict(cursor.fetchall())
    joined = _gather(made=made, decided=decided, over=over, kind=kind, lane=lane, when=when)
    rows = []
    queued = skipped = digested = 0
    for user_id, notification_id in made.items():
        found = decided[user_id]
        gathered = joined.get(user_id, {})
        digested += len(gathered)
        for channel, (reason, held_until) in found.rows.items():
            if channel in gathered:
                continue
            if reason is None:
                queued += 1
            else:
                skipped += 1
            rows.append(
                {
                    "notification": str(notification_id),
                    "channel": channel,
                    "reason": reason,
                    "held_until": None if held_until is None else held_until.isoformat(),
                    "version": found.version,
                }
            )
    if rows:
        with connection.cursor() as cursor:
            cursor.execute(DELIVER_EACH_SQL, {"rows": json.dumps(rows), "lane": lane, "when": when})
    return Expanded(broadcast_id, len(made), queued, skipped, digested)


def expand_next(*, lanes: list[str]) -> Expanded | None:
    """Claim the next chunk (lanes: their names in claim order) and expand it in one
    transaction; None when no chunk is waiting. A chunk whose expansion fails goes back for
    another drain, until DELIVERY_MAX_ATTEMPTS have failed; it is then left failed."""
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_CHUNK_SQL, {"lanes": lanes})
        claimed = cursor.fetchone()
    if claimed is None:
        return None
    chunk, broadcast_id, fence, users = claimed
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(BROADCAST_SQL, {"broadcast": broadcast_id})
                found = cursor.fetchone()
            if found is None or found[-1]:
                expanded = Expanded(broadcast_id, cancelled=True)
                status = ChunkStatus.CANCELLED
            else:
                kind, message_params, names, action_url, lane, when, key, _ = found
                names = None if names in (None, "null") else json.loads(names)
                expanded = _expand(
                    broadcast_id,
                    users,
                    params=(kind, message_params, names, action_url, lane, when, key),
                )
                status = ChunkStatus.DONE
            with connection.cursor() as cursor:
                cursor.execute(
                    FINISH_CHUNK_SQL,
                    {"status": status, "error": "", "chunk": chunk, "fence": fence},
                )
                if cursor.rowcount != 1:
                    raise _FencedOff
    except _FencedOff:
        logger.warning("broadcast chunk %s was taken by another drain; left to it", chunk)
        return Expanded(broadcast_id)
    except DatabaseError as exc:
        # A deadlock, a statement timeout, a lost server: the chunk goes back now rather than
        # when its lease runs out, if the database still answers; the drain's loop deals with
        # the error.
        with contextlib.suppress(DatabaseError):
            _failed(chunk, fence, f"{type(exc).__name__}: {exc}")
        raise
    except Exception as exc:
        logger.exception("broadcast chunk %s could not be expanded", chunk)
        _failed(chunk, fence, f"{type(exc).__name__}: {exc}")
        return Expanded(broadcast_id)
    if expanded.queued:
        wakeup.request_wake()
    return expanded


# A failed expansion: back to pending for another try, or failed once the budget is spent.
FAIL_CHUNK_SQL = """
UPDATE notifications.broadcast_chunks
SET status = CASE
        WHEN attempts - attempt_base >= %(max_attempts)s THEN 'failed' ELSE 'pending'
    END,
    error = %(error)s
WHERE id = %(chunk)s AND attempts = %(fence)s AND status = 'expanding'
""".strip()


def _failed(chunk: int, fence: int, error: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            FAIL_CHUNK_SQL,
            {
                "chunk": chunk,
                "fence": fence,
                "error": error[:2000],
                "max_attempts": settings.DELIVERY_MAX_ATTEMPTS,
            },
        )


def reclaim_stale_chunks(*, lease: timedelta) -> int:
    """Put back the chunks whose drain has not finished them within the lease; return how
    many."""
    with connection.cursor() as cursor:
        cursor.execute(RECLAIM_CHUNKS_SQL, {"lease_seconds": lease.total_seconds()})
        return cursor.rowcount


# A staff Retry of a failed chunk: pending again, with a fresh budget (attempt_base moves up to
# attempts, so the next claim still hands out a fence no earlier drain held).
RETRY_CHUNKS_SQL = """
UPDATE notifications.broadcast_chunks AS c
SET status = 'pending', attempt_base = attempts, error = ''
FROM notifications.broadcasts AS b
WHERE b.id = c.broadcast_id
  AND c.broadcast_id = %(broadcast)s
  AND c.status = 'failed'
  AND b.cancelled_at IS NULL
""".strip()


def retry_failed_chunks(broadcast: Broadcast) -> int:
    """Send the broadcast's failed chunks back to the drains, each with a fresh budget of
    attempts; return how many. A cancelled broadcast's stay as they are."""
    with connection.cursor() as cursor:
        cursor.execute(RETRY_CHUNKS_SQL, {"broadcast": broadcast.pk})
        count = cursor.rowcount
    if count:
        transaction.on_commit(wakeup.request_wake, robust=True)
    return count


# --- Cancelling ------------------------------------------------------------------------------

# The broadcast marked cancelled, once: its UPDATE waits for the expansions under way (they
# hold it FOR SHARE), and every expansion after it finds it cancelled and makes nothing.
MARK_CANCELLED_SQL = """
WITH marked AS (
    UPDATE notifications.broadcasts
    SET cancelled_at = coalesce(cancelled_at, now())
    WHERE id = %(broadcast)s
    RETURNING id
)
UPDATE notifications.broadcast_chunks
SET status = 'cancelled'
WHERE broadcast_id IN (SELECT id FROM marked) AND status = 'pending'
""".strip()


def cancel_broadcast(broadcast: Broadcast | uuid.UUID | str) -> CancelCounts:
    """Stop the broadcast's expansion and withdraw every delivery of it that no drain has
    claimed yet, as cancel_notifications() does for a key: one transaction, after which no
    drain claims a row of it."""
    broadcast_id = getattr(broadcast, "pk", broadcast)
    try:
        broadcast_id = uuid.UUID(str(broadcast_id))
    except ValueError:
        raise ValueError(f"{broadcast!r} is not a broadcast's id.") from None

    def cancel() -> CancelCounts:
        with connection.cursor() as cursor:
            cursor.execute(MARK_CANCELLED_SQL, {"broadcast": broadcast_id})
        return outbox.cancel_broadcast(broadcast_id=broadcast_id)

    return outbox.again_after_deadlock(cancel)


# --- Reading ---------------------------------------------------------------------------------

PROGRESS_SQL = """
SELECT
    (SELECT coalesce(sum(cardinality(user_ids)) FILTER (WHERE status = 'done'), 0)
     FROM notifications.broadcast_chunks WHERE broadcast_id = %(broadcast)s),
    (SELECT count(*) FILTER (WHERE status IN ('pending', 'expanding'))
     FROM notifications.broadcast_chunks WHERE broadcast_id = %(broadcast)s),
    (SELECT count(*) FILTER (WHERE status = 'failed')
     FROM notifications.broadcast_chunks WHERE broadcast_id = %(broadcast)s)
""".strip()

ROWS_SQL = """
SELECT d.channel, d.status, d.skip_reason, d.held_until IS NOT NULL, count(*)
FROM notifications.notifications AS n
JOIN notifications.notification_deliveries AS d ON d.notification_id = n.id
WHERE n.broadcast_id = %(broadcast)s
GROUP BY 1, 2, 3, 4
""".strip()

DIGESTED_SQL = """
SELECT c.channel, count(*)
FROM notifications.notifications AS n
JOIN notifications.digest_items AS i ON i.notification_id = n.id
JOIN notifications.notification_deliveries AS c ON c.id = i.carrier_id
WHERE n.broadcast_id = %(broadcast)s
GROUP BY 1
""".strip()


@dataclass(frozen=True)
class Progress:
    """How far a broadcast has come: recipients expanded of its total, chunks still to expand
    and failed, and per channel its rows by state (queued, held, sent, failed, dead, cancelled,
    processing, skipped by reason, digested)."""

    total: int
    expanded: int
    chunks_left: int
    chunks_failed: int
    channels: dict[str, dict[str, int]]

    @property
    def done(self) -> bool:
        return self.chunks_left == 0


def progress(broadcast: Broadcast) -> Progress:
    """Progress of broadcast, in three statements over its own rows."""
    params = {"broadcast": broadcast.pk}
    channels: dict[str, dict[str, int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(PROGRESS_SQL, params)
        expanded, left, failed = cursor.fetchone()
        cursor.execute(ROWS_SQL, params)
        for channel, status, reason, held, count in cursor.fetchall():
            counts = channels.setdefault(channel, {})
            if status == Status.SKIPPED:
                state = f"skipped:{reason}"
            elif status == Status.PENDING and held:
                state = "held"
            elif status == Status.PENDING:
                state = "queued"
            else:
                state = status
            counts[state] = counts.get(state, 0) + count
        cursor.execute(DIGESTED_SQL, params)
        for channel, count in cursor.fetchall():
            channels.setdefault(channel, {})["digested"] = count
    return Progress(broadcast.recipients, expanded, left, failed, channels)
