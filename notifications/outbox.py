"""The outbox queue's state machine, in raw SQL: the only module that moves a delivery between
states.

    pending --claim--> processing --sent--> sent
                           |----retryable, budget left--> pending (now() + backoff)
                           |----retryable, budget spent--> dead     (terminal; staff Retry)
                           |----not retryable----------> failed   (terminal)
                           |----throttled (a 429)--------> pending, the send not counted;
                           |                                 dead after DELIVERY_MAX_THROTTLES
                           |----not sent in time (release)--> pending, the send not counted
                           |----quiet hours hold it now (hold)--> pending until they end,
                           |                                 the send not counted
                           |----the recipient no longer wants it--> skipped (terminal)
                           '----lease expired (reaper)--> pending, or dead when spent
    pending --cancel--> cancelled (terminal; only a row no drain holds; a digest's carrier
                                   also when cancelling took out every notification it had)

Every statement is one statement, so it is its own transaction (but cancel_key's two, which
share one): no lock is held across a network call, and nothing here is session-scoped (it
works through PgBouncer in transaction pooling). Tables are schema-qualified because
production keeps the default search_path. Every time is the database's `now()`, never the app
server's clock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, connection, transaction
from psycopg.errors import DeadlockDetected

from notifications import backoff, digests, lanes
from notifications.lanes import Lane
from notifications.models import DEFAULT_LANE, DUE_SQL, Status

logger = logging.getLogger(__name__)


# ClaimedDelivery and Outcome are named tuples, not frozen dataclasses: a drain makes one of
# each per row, and a frozen dataclass's __init__ (one object.__setattr__ per field) cost
# about 4 µs each, a named tuple's under 0.5 (bench/profile_drain.py). Both stay immutable.
class ClaimedDelivery(NamedTuple):
    """A delivery this worker holds, with what sending it needs from its notification."""

    id: int
    channel: str
    attempts: int  # the fencing token: every write about this claim must match it
    attempt_base: int
    notification_id: UUID
    user_id: int
    type: str
    message_key: str
    message_params: dict[str, Any]
    action_url: str
    lane: str = DEFAULT_LANE
    throttles: int = 0  # the provider's 429s so far (each handed the row back, unspent)
    # The recipient changed their choices since this row was decided: the drain reads them
    # again before it sends (drain.py).
    rechoose: bool = False

    @property
    def sends(self) -> int:
        """Sends spent from the current budget, this one included."""
        return self.attempts - self.attempt_base


class Outcome(NamedTuple):
    """The result of one claimed send, ready to be written under its fence."""

    delivery_id: int
    attempts: int
    status: str
    delay: timedelta | None = None
    provider_message_id: str = ""
    error_code: str = ""
    error_message: str = ""
    channel: str = ""  # not written (the row has it): for the worker's counts per channel
    # The provider said "too many requests": the send is given back to the budget
    # (attempt_base moves up with attempts) and counted in throttles instead.
    throttled: bool = False
    # Why the row is skipped instead of sent (a SkipReason), with status skipped: the
    # recipient's choices, read again when its turn came, no longer want it.
    skip_reason: str = ""

    @classmethod
    def for_claim(cls, delivery: ClaimedDelivery, status: str, **fields) -> Outcome:
        """An outcome for this claim (its row, its fence, its channel) with status and fields."""
        return cls(delivery.id, delivery.attempts, status, channel=delivery.channel, **fields)

    @classmethod
    def sent(cls, delivery: ClaimedDelivery, *, provider_message_id: str) -> Outcome:
        # Every field by position: one is made for each row a drain sends, and the keywords
        # through for_claim cost twice as much.
        return cls(
            delivery.id,
            delivery.attempts,
            Status.SENT,
            None,
            # The column's length: a provider's id of any length must not fail the write.
            provider_message_id[:255],
            "",
            "",
            delivery.channel,
        )

    @classmethod
    def skip(cls, delivery: ClaimedDelivery, *, reason: str) -> Outcome:
        """Not sent, and never to be: the recipient no longer wants it on this channel, or
        can no longer be reached there (reason, a SkipReason)."""
        return cls.for_claim(
            delivery,
            Status.SKIPPED,
            error_message=SKIPPED_AT_CLAIM,
            skip_reason=str(reason),
        )

    @classmethod
    def failure(
        cls,
        delivery: ClaimedDelivery,
        *,
        code: str,
        message: str,
        retryable: bool,
        retry_after: timedelta | None = None,
        max_attempts: int | None = None,
        throttled: bool = False,
    ) -> Outcome:
        if throttled:
            return cls.throttle(delivery, retry_after=retry_after, message=message)
        decision = backoff.decide(
            attempts=delivery.sends,
            retryable=retryable,
            max_attempts=max_attempts or settings.DELIVERY_MAX_ATTEMPTS,
            retry_after=retry_after,
        )
        return cls.for_claim(
            delivery,
            decision.status,
            delay=decision.delay,
            error_code=code[:64],
            error_message=message[:2000],
        )

    @classmethod
    def throttle(
        cls,
        delivery: ClaimedDelivery,
        *,
        retry_after: timedelta | None = None,
        message: str = "",
        max_throttles: int | None = None,
    ) -> Outcome:
        """The provider answered 429: try again after retry_after (THROTTLE_DELAY when it gave
        none) without spending a send, or give up once it has said so max_throttles times
        (DELIVERY_MAX_THROTTLES)."""
        max_throttles = max_throttles or settings.DELIVERY_MAX_THROTTLES
        throttles = delivery.throttles + 1
        if throttles >= max_throttles:
            return cls.for_claim(
                delivery,
                Status.DEAD,
                error_code="THROTTLED",
                error_message=(
                    f"The provider refused {throttles} sends as too many requests (HTTP 429)."
                    + (f" Last: {message}" if message else "")
                )[:2000],
                throttled=True,
            )
        delay = retry_after if retry_after and retry_after > timedelta() else THROTTLE_DELAY
        return cls.for_claim(
            delivery,
            Status.PENDING,
            delay=delay,
            error_code="THROTTLED",
            error_message=(message or "Too many requests (HTTP 429).")[:2000],
            throttled=True,
        )


SKIPPED_AT_CLAIM = "Not sent: when its turn came, the recipient's choices no longer wanted it."

# How long a throttled row waits when the provider did not say (no Retry-After).
THROTTLE_DELAY = timedelta(seconds=30)

CLAIMED_FIELDS = list(ClaimedDelivery._fields)


# FOR UPDATE SKIP LOCKED: a claimer never waits for another; under contention it returns
# fewer rows than asked (LIMIT applies before the skipping), which is expected.
# One CTE per lane (DELIVERY_LANES), in rank order: each lane takes at most its cap, and at
# most what the lanes above it left of the batch, so however many rows wait on a lower lane
# they never stand ahead of a higher lane's. Each lane is its own range of the one claim index
# (lane, next_attempt_at, created_at, id), so a lower lane's backlog is never scanned.
# MATERIALIZED: each CTE runs exactly once, so LIMIT bounds the rows updated under any plan. A
# bare `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` may be re-evaluated by a
# join plan and claim more than n (tests/notifications/test_outbox.py shows it happen).
# The ORDER BY matches the claim index; id breaks ties so the order is total.
# `d.id = ANY(ARRAY(…))` hands the planner a list of ids, which it looks up by primary key;
# joined to the CTE instead, at batch 100 it preferred to hash a scan of the whole table.
# RETURNING aliases are double-quoted: unquoted, PostgreSQL would fold them to lower case.
# message_key is the catalogue's key: the type, or for a row queued before types were the
# catalogue's keys, the key it named apart.
# The lane names are literals in the text, so the statement is the same for every claim; they
# are held to [a-z0-9_-] (notifications/lanes.py) before they get here.
# rechoose compares the recipient's choices version now with the one the row was decided
# under (a subquery by the recipients' key, one index probe a row, whatever the plan): only
# the rows of recipients who changed something since are decided again before they go.
_LANE_SELECT = """
"lane_{index}" AS MATERIALIZED (  -- {name}
    SELECT id
    FROM notifications.notification_deliveries
    WHERE {due}
      AND lane = '{name}'
    ORDER BY next_attempt_at, created_at, id
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
)""".strip()

_CLAIM_UPDATE = """
UPDATE notifications.notification_deliveries AS d
SET status = 'processing',
    attempts = d.attempts + 1,
    attempted_at = now()
FROM notifications.notifications AS n
WHERE d.id = ANY(ARRAY(SELECT id FROM claimable))
  AND n.id = d.notification_id
RETURNING d.id AS "id",
          d.channel AS "channel",
          d.attempts AS "attempts",
          d.attempt_base AS "attempt_base",
          d.notification_id AS "notification_id",
          n.user_id AS "user_id",
          n.type AS "type",
          coalesce(nullif(n.message_key, ''), n.type) AS "message_key",
          n.message_params::text AS "message_params",
          n.action_url AS "action_url",
          d.lane AS "lane",
          d.throttles AS "throttles",
          coalesce(
              (SELECT version FROM notifications.choices_versions WHERE user_id = n.user_id),
              0
          ) <> d.decided_version AS "rechoose"
""".strip()


def claim_sql(claim_lanes: Sequence[Lane]) -> str:
    """The claim statement for these lanes (in claim order); its one parameter is
    %(batch_size)s."""
    if lanes.problems({lane.name: {"rank": lane.rank, "cap": lane.cap} for lane in claim_lanes}):
        raise ImproperlyConfigured("DELIVERY_LANES is not valid: run `manage.py check`.")
    selects, taken = [], ""
    for index, lane in enumerate(claim_lanes):
        left = f"%(batch_size)s{taken}"
        limit = left if lane.cap is None else f"least({lane.cap}, {left})"
        selects.append(_LANE_SELECT.format(index=index, name=lane.name, due=DUE_SQL, limit=limit))
        taken += f' - (SELECT count(*) FROM "lane_{index}")'
    union = "\n    UNION ALL\n    ".join(
        f'SELECT id FROM "lane_{index}"' for index in range(len(claim_lanes))
    )
    return "WITH " + ",\n".join(selects) + f",\nclaimable AS (\n    {union}\n)\n" + _CLAIM_UPDATE


def _configured_lanes() -> tuple[Lane, ...]:
    if lanes.problems(settings.DELIVERY_LANES):
        return ()  # the system check (notifications.E010-E015) says what is wrong
    return lanes.configured()


# The lanes and the claim, built once from the settings: every drain of the process claims
# with the same statement (and the showcase page shows it).
LANES = _configured_lanes()
CLAIM_SQL = claim_sql(LANES) if LANES else ""
# Each lane's place, looked up once per claimed row when the drain orders its batch.
_RANKS = {lane.name: place for place, lane in enumerate(LANES)}


def claim(*, batch_size: int) -> list[ClaimedDelivery]:
    """Claim up to batch_size due deliveries: mark them processing and bump their fence.

    Lane by lane in rank order, each lane taking at most its cap of what is left."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if not CLAIM_SQL:
        raise ImproperlyConfigured("DELIVERY_LANES is not valid: run `manage.py check`.")
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_SQL, {"batch_size": batch_size})
        return _claimed(cursor.fetchall())


_PARAMS_AT = CLAIMED_FIELDS.index("message_params")


def _claimed(rows: Sequence[tuple]) -> list[ClaimedDelivery]:
    """The claim's rows as ClaimedDelivery values.

    RETURNING names the fields in ClaimedDelivery's order (a test holds them to it), so a row
    maps onto it by position. message_params comes as text (Django's connection hands jsonb
    back undecoded), each one jsonb's output and so one JSON value: joined with commas they
    are one array, parsed in one call. A json.loads per row cost three times as much, most of
    it the call, not the parsing."""
    if not rows:
        return []
    at = _PARAMS_AT
    params = json.loads("[" + ",".join([row[at] for row in rows]) + "]")
    return [
        ClaimedDelivery(*row[:at], value, *row[at + 1 :])
        for row, value in zip(rows, params, strict=True)
    ]


def more_due(claimed: Sequence[ClaimedDelivery], *, batch_size: int) -> bool:
    """Whether more rows may be due right now: the batch came back full, or a capped lane
    took its cap (its rows beyond it wait for the next batch)."""
    if len(claimed) >= batch_size:
        return True
    per_lane: dict[str, int] = {}
    for delivery in claimed:
        per_lane[delivery.lane] = per_lane.get(delivery.lane, 0) + 1
    return any(lane.cap is not None and per_lane.get(lane.name, 0) >= lane.cap for lane in LANES)


def rank(lane: str) -> int:
    """A lane's place in the claim order (an unknown lane comes last)."""
    return _RANKS.get(lane, len(LANES))


# One statement per flush, each row still guarded by its own fence: id, the attempts value
# its claim returned, and a status a late write may still change. `pending` is in the guard
# on purpose: a success reported after the reaper requeued the row, but before anyone
# re-claimed it, must land — or the notification would be sent twice.
# A throttled outcome hands its send back (attempt_base moves up with attempts, as in
# RELEASE_SQL) and counts a 429 instead. It also needs the claim's send still unreturned
# (attempt_base < attempts): after a staff Retry of a row the reaper had given up on, the
# same fence value would otherwise move attempt_base past attempts.
# The rows come in as one JSON array of objects, one per outcome (jsonb_to_recordset), so the
# text of the statement is the same for any number of rows, and the client turns a flush into
# one string: Django's backend binds on the client, and quoting eight arrays element by
# element cost the drain more than PostgreSQL's reading of the JSON.
WRITE_OUTCOMES_SQL = """
UPDATE notifications.notification_deliveries AS d
SET status = o.status,
    next_attempt_at = CASE
        WHEN o.status = 'pending' THEN now() + make_interval(secs => o.delay_seconds)
        ELSE d.next_attempt_at
    END,
    sent_at = CASE WHEN o.status = 'sent' THEN now() ELSE d.sent_at END,
    provider_message_id = CASE
        WHEN o.status = 'sent' THEN o.provider_message_id
        ELSE d.provider_message_id
    END,
    error_code = o.error_code,
    error_message = o.error_message,
    attempt_base = CASE WHEN o.throttled THEN d.attempt_base + 1 ELSE d.attempt_base END,
    throttles = CASE WHEN o.throttled THEN d.throttles + 1 ELSE d.throttles END,
    skip_reason = coalesce(o.skip_reason, '')
FROM jsonb_to_recordset(%(outcomes)s::jsonb) AS o(
    id bigint,
    attempts integer,
    status text,
    delay_seconds double precision,
    provider_message_id text,
    error_code text,
    error_message text,
    throttled boolean,
    skip_reason text
)
WHERE d.id = o.id
  AND d.attempts = o.attempts
  AND (
      d.status IN ('processing', 'pending')
      -- Sent after all: the claim's lease ran out, the reaper put the row back, and a cancel
      -- took it before anyone claimed it again. The message went out; the row says so.
      OR (o.status = 'sent' AND d.status = 'cancelled')
  )
  AND (NOT o.throttled OR d.attempt_base < d.attempts)
RETURNING d.id
""".strip()


def _storable(text: str) -> str:
    """text as a PostgreSQL text column takes it: without NUL, which a provider's error body
    may carry and which would make the whole flush fail, every time it is tried again."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def outcomes_json(outcomes: Sequence[Outcome]) -> str:
    """The outcomes as WRITE_OUTCOMES_SQL reads them."""
    # A status is a str (Status members are too, and json writes them as their value); the
    # free texts are checked for NUL only when there is text, as a sent row's error has none.
    return json.dumps(
        [
            {
                "id": o.delivery_id,
                "attempts": o.attempts,
                "status": o.status,
                "delay_seconds": o.delay.total_seconds() if o.delay else 0.0,
                "provider_message_id": _storable(o.provider_message_id)
                if o.provider_message_id
                else "",
                "error_code": _storable(o.error_code) if o.error_code else "",
                "error_message": _storable(o.error_message) if o.error_message else "",
                "throttled": o.throttled,
                # Left out when empty (most rows): the statement reads a missing one as ''.
                **({"skip_reason": o.skip_reason} if o.skip_reason else {}),
            }
            for o in outcomes
        ]
    )


def write_outcomes(outcomes: Sequence[Outcome]) -> set[int]:
    """Write outcomes under their fences; return the ids whose write landed."""
    if not outcomes:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(WRITE_OUTCOMES_SQL, {"outcomes": outcomes_json(outcomes)})
        return {row[0] for row in cursor.fetchall()}


# A claimed row that was never sent (a time-boxed drain ran out of time before its turn, or
# the provider's pace said not yet) goes back to the queue, due at once or after the delay.
# Its claim bumped attempts; moving attempt_base up with it gives
# that send back to the budget without reusing a fence value. Fenced like any other write.
RELEASE_SQL = """
UPDATE notifications.notification_deliveries AS d
SET status = 'pending',
    next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
    attempt_base = d.attempt_base + 1
FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS r(id, attempts)
WHERE d.id = r.id
  AND d.attempts = r.attempts
  AND d.status = 'processing'
RETURNING d.id
""".strip()


def release(deliveries: Sequence[ClaimedDelivery], *, delay: float | timedelta = 0.0) -> set[int]:
    """Return claimed but unsent deliveries to the queue, due after delay (seconds, or a
    timedelta; at once by default), the claim not counted; return the ids that went back."""
    if not deliveries:
        return set()
    if isinstance(delay, timedelta):
        delay = delay.total_seconds()
    if not 0 <= delay <= 86_400:
        raise ValueError(f"delay must be 0 to 86400 seconds, not {delay}")
    params = {
        "ids": [d.id for d in deliveries],
        "attempts": [d.attempts for d in deliveries],
        "delay_seconds": float(delay),
    }
    with connection.cursor() as cursor:
        cursor.execute(RELEASE_SQL, params)
        return {row[0] for row in cursor.fetchall()}


# A claimed row the recipient's quiet hours hold now (they were set, or moved, after it was
# queued): back to the queue until the window ends, the claim not counted, as RELEASE_SQL
# does. held_from keeps when it was due (now, or the earlier time a previous hold kept), for
# RELEASE_HELD_SQL to go back to. Fenced like any other write.
QUIET_HOLD_SQL = """
UPDATE notifications.notification_deliveries AS d
SET status = 'pending',
    next_attempt_at = h.until,
    held_until = h.until,
    held_from = least(coalesce(d.held_from, now()), now()),
    attempt_base = d.attempt_base + 1
FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[], %(until)s::timestamptz[])
    AS h(id, attempts, until)
WHERE d.id = h.id
  AND d.attempts = h.attempts
  AND d.status = 'processing'
RETURNING d.id
""".strip()


def hold_quiet(held: Sequence[tuple[ClaimedDelivery, datetime]]) -> set[int]:
    """Return claimed deliveries to the queue until the end of the quiet window that holds
    each, (delivery, until) pairs, the claim not counted; return the ids that went back."""
    if not held:
        return set()
    params = {
        "ids": [d.id for d, _ in held],
        "attempts": [d.attempts for d, _ in held],
        "until": [until for _, until in held],
    }
    with connection.cursor() as cursor:
        cursor.execute(QUIET_HOLD_SQL, params)
        return {row[0] for row in cursor.fetchall()}


# A recipient changed or cleared their quiet hours: every row of theirs that quiet hours hold
# and no drain has claimed is due again when it was due before the hold (held_from; now, if
# that has passed). A row the new window holds is held again by the claim that takes it
# (drain.py), so this never has to compute the new window itself. The claim index's
# condition (pending) and the notification's user narrow it to one recipient's rows.
RELEASE_HELD_SQL = """
UPDATE notifications.notification_deliveries AS d
SET next_attempt_at = greatest(coalesce(d.held_from, now()), now()),
    held_until = NULL,
    held_from = NULL
FROM notifications.notifications AS n
WHERE n.id = d.notification_id
  AND n.user_id = %(user_id)s
  AND d.status = 'pending'
  AND d.held_until IS NOT NULL
RETURNING d.id
""".strip()


def release_held(*, user_id: int) -> set[int]:
    """Make user_id's rows that quiet hours hold due again as if never held (run when they
    change their quiet hours); return the ids released."""
    with connection.cursor() as cursor:
        cursor.execute(RELEASE_HELD_SQL, {"user_id": user_id})
        return {row[0] for row in cursor.fetchall()}


# A recipient changed or dropped their digest of a category: its open carriers (pending, never
# claimed, so still gathering) are due no later than %(due)s, the new choice's window end, or
# now for "as it happens". Quiet hours still hold one at its claim. A carrier's category is in
# its notification's params (digests.CARRIER_SQL); throttle windows are the site's, not the
# recipient's choice, and keep their time.
HASTEN_CARRIERS_SQL = """
UPDATE notifications.notification_deliveries AS d
SET next_attempt_at = least(d.next_attempt_at, greatest(%(due)s::timestamptz, now()))
FROM notifications.notifications AS n
WHERE n.id = d.notification_id
  AND n.user_id = %(user_id)s
  AND n.type = %(digest)s
  AND n.message_params ->> 'kind' = %(kind)s
  AND n.message_params ->> 'category' = %(category)s
  AND d.status = 'pending'
  AND d.attempts = 0
RETURNING d.id
""".strip()


def hasten_carriers(*, user_id: int, category: str, due: datetime | None) -> set[int]:
    """Make user_id's open digest carriers of category due by due (None: now); return their
    ids."""
    params = {
        "user_id": user_id,
        "category": category,
        "due": due,
        "digest": digests.DIGEST,
        "kind": digests.DIGEST_KIND,
    }
    with connection.cursor() as cursor:
        cursor.execute(HASTEN_CARRIERS_SQL, params)
        return {row[0] for row in cursor.fetchall()}


# The lanes that pending rows stand in, found by probes of the claim index (a loose index
# scan: each step looks up the next lane name above the last), however many rows there are.
PENDING_LANES_CTE = """
WITH RECURSIVE lanes(lane) AS (
    SELECT min(lane) FROM notifications.notification_deliveries WHERE status = 'pending'
    UNION ALL
    SELECT (
        SELECT min(d.lane) FROM notifications.notification_deliveries AS d
        WHERE d.status = 'pending' AND d.lane > lanes.lane
    )
    FROM lanes WHERE lanes.lane IS NOT NULL
)
""".strip()

# Pending rows in a lane the settings no longer name (a lane renamed or removed, an
# app's own lane on a site that no longer installs it) would never be claimed: they join the default
# lane. Run with the reaper, once an interval.
ADOPT_LOST_LANES_SQL = f"""
{PENDING_LANES_CTE}
UPDATE notifications.notification_deliveries
SET lane = %(default)s
WHERE status = 'pending'
  AND lane IN (SELECT lane FROM lanes WHERE lane IS NOT NULL AND lane <> ALL(%(known)s))
""".strip()


def adopt_lost_lanes() -> int:
    """Move pending rows of unconfigured lanes to the default lane; return how many."""
    if not LANES:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            ADOPT_LOST_LANES_SQL,
            {"default": DEFAULT_LANE, "known": [lane.name for lane in LANES]},
        )
        adopted = cursor.rowcount
    if adopted:
        logger.warning(
            "%d pending deliveries stood in lanes DELIVERY_LANES does not name; moved to %s",
            adopted,
            DEFAULT_LANE,
        )
    return adopted


# The lease clock starts at attempted_at, stamped once per claim for the whole batch. The
# reaper does not bump attempts: the claim already counted the send it interrupted. It counts
# the claim in unreported_claims: its drain may have sent the message before it went quiet.
# Served by the deliveries_reap partial index.
RECLAIM_STALE_SQL = """
UPDATE notifications.notification_deliveries
SET status = CASE
        WHEN attempts - attempt_base >= %(max_attempts)s THEN 'dead'
        ELSE 'pending'
    END,
    unreported_claims = unreported_claims + 1,
    next_attempt_at = now(),
    error_code = 'CLAIM_EXPIRED',
    error_message = 'The worker holding this delivery did not report within its lease.'
WHERE status = 'processing'
  AND attempted_at < now() - make_interval(secs => %(lease_seconds)s)
RETURNING id, status
""".strip()


@dataclass(frozen=True)
class Reaped:
    requeued: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.requeued) + len(self.dead)


def reclaim_stale(*, lease: timedelta, max_attempts: int | None = None) -> Reaped:
    """Requeue deliveries held past the lease, or dead-letter them when the budget is spent
    (max_attempts, DELIVERY_MAX_ATTEMPTS unless given)."""
    max_attempts = max_attempts or settings.DELIVERY_MAX_ATTEMPTS
    with connection.cursor() as cursor:
        cursor.execute(
            RECLAIM_STALE_SQL,
            {"lease_seconds": lease.total_seconds(), "max_attempts": max_attempts},
        )
        rows = cursor.fetchall()
    return Reaped(
        requeued=[i for i, status in rows if status == Status.PENDING],
        dead=[i for i, status in rows if status == Status.DEAD],
    )


# A staff Retry: due now, by the database clock, with a fresh budget. The budget restarts by
# moving attempt_base up to attempts, never by resetting attempts, so the next claim hands
# out a fence value no earlier worker ever held. The count of 429s starts again too.
RETRY_SQL = """
UPDATE notifications.notification_deliveries
SET status = 'pending',
    next_attempt_at = now(),
    attempt_base = attempts,
    throttles = 0
WHERE id = %(delivery_id)s
  AND status = ANY(%(statuses)s::text[])
RETURNING id
""".strip()


def retry(*, delivery_id: int, include_failed: bool = False) -> bool:
    """Requeue a dead delivery (or a failed one, when asked); return False if it was neither."""
    statuses = [Status.DEAD, Status.FAILED] if include_failed else [Status.DEAD]
    with connection.cursor() as cursor:
        cursor.execute(
            RETRY_SQL, {"delivery_id": delivery_id, "statuses": [str(s) for s in statuses]}
        )
        return cursor.fetchone() is not None


# Staff (the admin) sending a scheduled delivery now: due at once, by the database clock. Only
# a pending row whose time has not come is moved; a row a drain holds is left to it.
SEND_NOW_SQL = """
UPDATE notifications.notification_deliveries
SET next_attempt_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status = 'pending'
  AND next_attempt_at > now()
RETURNING id
""".strip()


def send_now(delivery_ids: Sequence[int]) -> set[int]:
    """Make waiting pending deliveries due now; return the ids that moved."""
    return _update_ids(SEND_NOW_SQL, delivery_ids)


# Withdrawing deliveries before they are sent. Only `pending` rows: a row a drain holds is
# being sent, and a finished one has nothing left to withdraw. This is atomic against the
# claim: the claim locks its rows FOR UPDATE SKIP LOCKED and sets them processing in the same
# statement, and this UPDATE locks each row it changes. If the claim locked a row first, this
# statement waits for it, re-reads the row (READ COMMITTED re-checks the WHERE on the newest
# version), finds it processing and leaves it; if this statement locked it first, the claim
# skips it, and after it commits the claim's own re-check finds it cancelled. So a row is
# claimed or cancelled, never both.
# A row an earlier claim may have sent (its lease ran out without a report: unreported_claims)
# keeps that fact in its error, so staff reading "cancelled" read "may have been sent" too.
_CANCEL_SET = f"""
SET status = '{Status.CANCELLED}',
    error_code = CASE WHEN unreported_claims > 0 THEN 'CANCELLED_MAYBE_SENT' ELSE 'CANCELLED' END,
    error_message = CASE
        WHEN unreported_claims > 0 THEN
            'Cancelled before it was sent again. An earlier claim ended without a report, so '
            || 'that attempt may have sent it.'
        ELSE 'Cancelled before it was sent.'
    END
""".strip()

CANCEL_SQL = f"""
UPDATE notifications.notification_deliveries
{_CANCEL_SET}
WHERE id = ANY(%(ids)s::bigint[])
  AND status = 'pending'
RETURNING id
""".strip()


def cancel(delivery_ids: Sequence[int]) -> set[int]:
    """Cancel these deliveries where they are still pending; return the ids cancelled."""
    return _update_ids(CANCEL_SQL, delivery_ids)


# A notification gathered into a digest has no delivery of its own on that channel: it is an
# item of the carrier (digest_items), and cancelling it withdraws the item while the carrier is
# open (pending, never claimed: what a join may still add to). First, the open carriers holding
# the key's items are locked, FOR NO KEY UPDATE and in id order (two cancels lock them in the
# same order). That lock is the join's and the claim's answer: a join locks its carrier FOR
# SHARE and a claim FOR UPDATE SKIP LOCKED, so this waits for a join or a claim under way to
# commit, and a claim that comes after skips the carrier until this transaction has. After a
# wait PostgreSQL re-reads the carrier, so one a claim took meanwhile (processing, attempts
# bumped) is no longer open and is not locked: it keeps its items, fixed by the claim, and the
# key's notification in it is in flight.
_LOCK_CARRIERS = f"""
SELECT d.id
FROM notifications.notification_deliveries AS d
WHERE d.id IN (
    SELECT i.carrier_id
    FROM notifications.digest_items AS i
    JOIN notifications.notifications AS n ON n.id = i.notification_id
    WHERE {{match}}
)
  AND d.status = '{Status.PENDING}'
  AND d.attempts = 0
ORDER BY d.id
FOR NO KEY UPDATE OF d
""".strip()

# Then, in the same transaction, one statement: every pending delivery of the notifications
# under the key cancelled, their items withdrawn from the carriers locked above, each of those
# carriers left with no item cancelled too (a digest of nothing is not sent), and the key's
# other deliveries and items counted. The SELECT reads the snapshot taken before the UPDATE: a
# row it sees pending that the UPDATE did not cancel was claimed meanwhile (the UPDATE waited
# for that claim, see above), so it is in flight.
#
# It is a second statement, not a CTE of the first, because of what it must see: a join that
# the lock waited for added an item after the first statement's snapshot was taken, and only a
# later statement's snapshot has it. Judged from the first snapshot, a carrier holding that
# item could look empty and be cancelled, and the joined notification with it. While the
# carriers are locked no join adds to them and no claim takes them, so what this statement
# reads of them is how they are sent, or cancelled.
_CANCEL_MATCHED = f"""
WITH keyed AS (
    SELECT d.id, d.status
    FROM notifications.notification_deliveries AS d
    JOIN notifications.notifications AS n ON n.id = d.notification_id
    WHERE {{match}}
),
items AS (
    SELECT i.carrier_id, i.notification_id, c.status
    FROM notifications.digest_items AS i
    JOIN notifications.notifications AS n ON n.id = i.notification_id
    JOIN notifications.notification_deliveries AS c ON c.id = i.carrier_id
    WHERE {{match}}
),
cancelled AS (
    UPDATE notifications.notification_deliveries AS d
    {_CANCEL_SET}
    FROM keyed
    WHERE d.id = keyed.id
      AND d.status = 'pending'
    RETURNING d.id, d.unreported_claims > 0 AS maybe_sent
),
withdrawn AS (
    DELETE FROM notifications.digest_items AS i
    USING items
    WHERE i.carrier_id = items.carrier_id
      AND i.notification_id = items.notification_id
      AND i.carrier_id = ANY(%(carriers)s::bigint[])
    RETURNING i.carrier_id, i.notification_id
),
emptied AS (
    UPDATE notifications.notification_deliveries AS d
    SET status = '{Status.CANCELLED}',
        error_code = 'CANCELLED',
        error_message = 'Every notification it gathered was cancelled before it was sent.'
    WHERE d.id = ANY(%(carriers)s::bigint[])
      AND d.status = '{Status.PENDING}'
      AND d.attempts = 0
      AND NOT EXISTS (
          SELECT FROM notifications.digest_items AS i
          WHERE i.carrier_id = d.id
            AND NOT EXISTS (
                SELECT FROM items
                WHERE items.carrier_id = i.carrier_id
                  AND items.notification_id = i.notification_id
            )
      )
    RETURNING d.id
),
kept AS (
    SELECT items.status
    FROM items
    WHERE NOT EXISTS (
        SELECT FROM withdrawn
        WHERE withdrawn.carrier_id = items.carrier_id
          AND withdrawn.notification_id = items.notification_id
    )
)
SELECT (SELECT count(*) FROM cancelled WHERE NOT maybe_sent) + (SELECT count(*) FROM withdrawn)
           AS "cancelled",
       count(*) FILTER (
           WHERE keyed.status = 'processing'
              OR (keyed.status = 'pending' AND keyed.id NOT IN (SELECT id FROM cancelled))
       ) + (SELECT count(*) FROM kept WHERE kept.status = ANY(%(open)s::text[])) AS "in_flight",
       count(*) FILTER (WHERE keyed.status <> ALL(%(open)s::text[]))
           + (SELECT count(*) FROM kept WHERE kept.status <> ALL(%(open)s::text[]))
           AS "finished",
       (SELECT count(*) FROM emptied) AS "emptied",
       (SELECT count(*) FROM cancelled WHERE maybe_sent) AS "maybe_sent"
FROM keyed
""".strip()

# Which notifications a cancel takes: those under a key (of one user, when given), or those
# of one broadcast.
_BY_KEY = (
    "n.cancel_key = %(key)s AND (%(user_id)s::bigint IS NULL OR n.user_id = %(user_id)s::bigint)"
)
_BY_BROADCAST = "n.broadcast_id = %(broadcast)s"
LOCK_CARRIERS_SQL = _LOCK_CARRIERS.format(match=_BY_KEY)
CANCEL_KEY_SQL = _CANCEL_MATCHED.format(match=_BY_KEY)
LOCK_BROADCAST_CARRIERS_SQL = _LOCK_CARRIERS.format(match=_BY_BROADCAST)
CANCEL_BROADCAST_SQL = _CANCEL_MATCHED.format(match=_BY_BROADCAST)


@dataclass(frozen=True)
class CancelCounts:
    """What cancelling a key did: deliveries cancelled now that were never sent (a
    notification withdrawn from a digest not yet claimed counts as one per channel);
    deliveries a drain holds (being sent, so no longer cancellable), and items of a digest
    that was claimed already; deliveries and items already finished (sent, failed, dead, or
    cancelled before); and, counted apart from cancelled, deliveries cancelled now that an
    earlier claim may have sent (its lease ran out without a report: the recipient may have
    it)."""

    cancelled: int
    in_flight: int
    finished: int
    maybe_sent: int = 0


def cancel_key(*, key: str, user_id: int | None = None) -> CancelCounts:
    """Cancel every pending delivery under key (of user_id's notifications, when given), and
    withdraw its notifications from the digests that have not been claimed yet.

    Two statements in one transaction (CANCEL_KEY_SQL says why): the one place here that
    holds a lock across statements, for as long as it takes to run the second."""
    params = {"key": key, "user_id": user_id}
    return again_after_deadlock(lambda: _cancel_matched(LOCK_CARRIERS_SQL, CANCEL_KEY_SQL, params))


# How many times a cancel runs when PostgreSQL picks it to end a deadlock.
DEADLOCK_ATTEMPTS = 3


def again_after_deadlock(work):
    """work() in a transaction (a savepoint inside the caller's), run again when PostgreSQL
    ends it to break a deadlock. A cancel's UPDATE waits for each row another statement is
    changing and keeps it locked after, changed or not; a drain writing its batch's outcomes
    locks its rows in another order, so the two can wait for each other. PostgreSQL ends one;
    a cancel is safe to run again (what it cancelled is cancelled), so it is."""
    for attempt in range(DEADLOCK_ATTEMPTS):
        try:
            with transaction.atomic():
                return work()
        except OperationalError as exc:
            if not isinstance(exc.__cause__, DeadlockDetected) or attempt + 1 == DEADLOCK_ATTEMPTS:
                raise
            logger.warning("a cancel was ended to break a deadlock; running it again")
    raise AssertionError("unreachable")


def cancel_broadcast(*, broadcast_id) -> CancelCounts:
    """Cancel every pending delivery of the broadcast's notifications, and withdraw them from
    the digests not claimed yet, as cancel_key does for a key."""
    return _cancel_matched(
        LOCK_BROADCAST_CARRIERS_SQL, CANCEL_BROADCAST_SQL, {"broadcast": broadcast_id}
    )


def _cancel_matched(lock_sql: str, cancel_sql: str, params: dict) -> CancelCounts:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(lock_sql, params)
        carriers = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            cancel_sql,
            {**params, "carriers": carriers, "open": [Status.PENDING, Status.PROCESSING]},
        )
        cancelled, in_flight, finished, _emptied, maybe_sent = cursor.fetchone()
    return CancelCounts(cancelled, in_flight, finished, maybe_sent)


def _update_ids(sql: str, delivery_ids: Sequence[int]) -> set[int]:
    ids = [int(i) for i in delivery_ids]
    if not ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": ids})
        return {row[0] for row in cursor.fetchall()}
