"""The outbox queue's state machine, in raw SQL: the only module that moves a delivery between
states.

    pending --claim--> processing --sent--> sent
                           |----retryable, budget left--> pending (now() + backoff)
                           |----retryable, budget spent--> dead     (terminal; staff Retry)
                           |----not retryable----------> failed   (terminal)
                           |----not sent in time (release)--> pending, the send not counted
                           '----lease expired (reaper)--> pending, or dead when spent

Every statement is one statement, so it is its own transaction: no lock is held across a
network call, and nothing here is session-scoped (it works through PgBouncer in transaction
pooling). Tables are schema-qualified because production keeps the default search_path. Every
time is the database's `now()`, never the app server's clock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection

from notifications import backoff
from notifications.models import DEMO_CHANNEL, DUE_SQL, Status


@dataclass(frozen=True)
class ClaimedDelivery:
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

    @property
    def sends(self) -> int:
        """Sends spent from the current budget, this one included."""
        return self.attempts - self.attempt_base


@dataclass(frozen=True)
class Outcome:
    """The result of one claimed send, ready to be written under its fence."""

    delivery_id: int
    attempts: int
    status: str
    delay: timedelta | None = None
    provider_message_id: str = ""
    error_code: str = ""
    error_message: str = ""
    channel: str = ""  # not written (the row has it): for the worker's counts per channel

    @classmethod
    def sent(cls, delivery: ClaimedDelivery, *, provider_message_id: str) -> Outcome:
        return cls(
            delivery.id,
            delivery.attempts,
            Status.SENT,
            provider_message_id=provider_message_id,
            channel=delivery.channel,
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
    ) -> Outcome:
        decision = backoff.decide(
            attempts=delivery.sends,
            retryable=retryable,
            max_attempts=max_attempts or settings.DELIVERY_MAX_ATTEMPTS,
            retry_after=retry_after,
        )
        return cls(
            delivery.id,
            delivery.attempts,
            decision.status,
            delay=decision.delay,
            error_code=code[:64],
            error_message=message[:2000],
            channel=delivery.channel,
        )


CLAIMED_FIELDS = [f.name for f in fields(ClaimedDelivery)]


# FOR UPDATE SKIP LOCKED: a claimer never waits for another; under contention it returns
# fewer rows than asked (LIMIT applies before the skipping), which is expected.
# Two lanes: real deliveries first, then the visitors' demo rows fill what the batch has
# left, at most demo_batch_size of them. However many demo rows are queued, they can never
# stand ahead of a real one; each lane has its own partial index in the claim order.
# MATERIALIZED: each CTE runs exactly once, so LIMIT bounds the rows updated under any plan. A
# bare `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` may be re-evaluated by a
# join plan and claim more than n (tests/notifications/test_outbox.py shows it happen).
# The ORDER BY matches the claim indexes; id breaks ties so the order is total.
# `d.id = ANY(ARRAY(…))` hands the planner a list of ids, which it looks up by primary key;
# joined to the CTE instead, at batch 100 it preferred to hash a scan of the whole table.
# RETURNING aliases are double-quoted: unquoted, PostgreSQL would fold them to lower case.
CLAIM_SQL = f"""
WITH real_rows AS MATERIALIZED (
    SELECT id
    FROM notifications.notification_deliveries
    WHERE {DUE_SQL}
      AND channel <> '{DEMO_CHANNEL}'
    ORDER BY next_attempt_at, created_at, id
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
),
demo_rows AS MATERIALIZED (
    SELECT id
    FROM notifications.notification_deliveries
    WHERE {DUE_SQL}
      AND channel = '{DEMO_CHANNEL}'
    ORDER BY next_attempt_at, created_at, id
    LIMIT least(%(demo_batch_size)s, %(batch_size)s - (SELECT count(*) FROM real_rows))
    FOR UPDATE SKIP LOCKED
),
claimable AS (
    SELECT id FROM real_rows
    UNION ALL
    SELECT id FROM demo_rows
)
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
          n.message_key AS "message_key",
          n.message_params::text AS "message_params",
          n.action_url AS "action_url"
""".strip()


def claim(*, batch_size: int, demo_batch_size: int | None = None) -> list[ClaimedDelivery]:
    """Claim up to batch_size due deliveries: mark them processing and bump their fence.

    Real deliveries come first; demo rows only fill the rest, at most demo_batch_size of them
    (default: as many as fit)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if demo_batch_size is None:
        demo_batch_size = batch_size
    if demo_batch_size < 0:
        raise ValueError(f"demo_batch_size must not be negative, not {demo_batch_size}")
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_SQL, {"batch_size": batch_size, "demo_batch_size": demo_batch_size})
        rows = cursor.fetchall()
    # RETURNING names the fields in ClaimedDelivery's order (a test holds them to it), so a
    # row maps onto it by position. message_params comes as text and is parsed here: Django's
    # connection hands jsonb back undecoded.
    params = CLAIMED_FIELDS.index("message_params")
    return [
        ClaimedDelivery(*row[:params], json.loads(row[params]), *row[params + 1 :]) for row in rows
    ]


# One statement per flush, each row still guarded by its own fence: id, the attempts value
# its claim returned, and a status a late write may still change. `pending` is in the guard
# on purpose: a success reported after the reaper requeued the row, but before anyone
# re-claimed it, must land — or the notification would be sent twice.
# The rows come in as parallel arrays (unnest) rather than a VALUES list, so the text of the
# statement is the same for any number of rows.
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
    error_message = o.error_message
FROM unnest(
    %(ids)s::bigint[],
    %(attempts)s::integer[],
    %(statuses)s::text[],
    %(delay_seconds)s::double precision[],
    %(provider_message_ids)s::text[],
    %(error_codes)s::text[],
    %(error_messages)s::text[]
) AS o(id, attempts, status, delay_seconds, provider_message_id, error_code, error_message)
WHERE d.id = o.id
  AND d.attempts = o.attempts
  AND d.status IN ('processing', 'pending')
RETURNING d.id
""".strip()


def write_outcomes(outcomes: Sequence[Outcome]) -> set[int]:
    """Write outcomes under their fences; return the ids whose write landed."""
    if not outcomes:
        return set()
    params = {
        "ids": [o.delivery_id for o in outcomes],
        "attempts": [o.attempts for o in outcomes],
        "statuses": [str(o.status) for o in outcomes],
        "delay_seconds": [o.delay.total_seconds() if o.delay else 0.0 for o in outcomes],
        "provider_message_ids": [o.provider_message_id for o in outcomes],
        "error_codes": [o.error_code for o in outcomes],
        "error_messages": [o.error_message for o in outcomes],
    }
    with connection.cursor() as cursor:
        cursor.execute(WRITE_OUTCOMES_SQL, params)
        return {row[0] for row in cursor.fetchall()}


# A claimed row that was never sent (a time-boxed drain ran out of time before its turn) goes
# back to the queue at once. Its claim bumped attempts; moving attempt_base up with it gives
# that send back to the budget without reusing a fence value. Fenced like any other write.
RELEASE_SQL = """
UPDATE notifications.notification_deliveries AS d
SET status = 'pending',
    next_attempt_at = now(),
    attempt_base = d.attempt_base + 1
FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS r(id, attempts)
WHERE d.id = r.id
  AND d.attempts = r.attempts
  AND d.status = 'processing'
RETURNING d.id
""".strip()


def release(deliveries: Sequence[ClaimedDelivery]) -> set[int]:
    """Return claimed but unsent deliveries to the queue; return the ids that went back."""
    if not deliveries:
        return set()
    params = {"ids": [d.id for d in deliveries], "attempts": [d.attempts for d in deliveries]}
    with connection.cursor() as cursor:
        cursor.execute(RELEASE_SQL, params)
        return {row[0] for row in cursor.fetchall()}


# The lease clock starts at attempted_at, stamped once per claim for the whole batch. The
# reaper does not bump attempts: the claim already counted the send it interrupted.
# Served by the deliveries_reap partial index.
RECLAIM_STALE_SQL = """
UPDATE notifications.notification_deliveries
SET status = CASE
        WHEN attempts - attempt_base >= %(max_attempts)s THEN 'dead'
        ELSE 'pending'
    END,
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
# out a fence value no earlier worker ever held.
RETRY_SQL = """
UPDATE notifications.notification_deliveries
SET status = 'pending',
    next_attempt_at = now(),
    attempt_base = attempts
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
