"""Numbers about the queue, as data: counts per state, channel health, outcomes per hour.

Read-only and presentation-free, so the admin's dashboard, the public page and anything else
that reports on the queue (a metrics endpoint) share one set of queries. Every statement is
served by an index, so its cost follows the size of what it counts, not of the table: the
health and the hourly chart read only the last 24 hours of attempts, from an index that
carries every column they count by (deliveries_attempted), without visiting the table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.db import connection

import transports as channels
from notifications.models import DUE_SQL, SHOWN_SQL, ShownStatus, Status
from notifications.models import OUTCOMES as OUTCOMES_BY_STATUS
from notifications.outbox import LANES


# Each count reads one partial index (waiting, retrying, the claim's, reap, dead, failed,
# cancelled, skipped), so the cost follows the size of that state, not of the table. Pending and
# retrying are the two halves of the stored pending (ShownStatus), spelled by the models' own
# SQL fragments. Due rows are counted lane by lane: the claim index leads with the lane, then
# next_attempt_at, so one lane's due rows are one range of it. With a limit (the public
# page: every visitor polls this), each count stops at the limit, so the cost is bounded
# whatever the backlog; LIMIT NULL is PostgreSQL's "no limit", which the admin's exact counts
# use. `sent` is most of a mature table and has no index of its own: it is counted while the
# table is small, and estimated from the planner's statistics once it is large.
def _bounded_count(where: str) -> str:
    return (
        "(SELECT count(*) FROM (SELECT FROM notifications.notification_deliveries"
        f" WHERE {where} LIMIT %(limit)s) AS s)"
    )


# The states QueueDepth counts, each by its own partial index; sent is counted apart.
COUNTED = (
    ShownStatus.PENDING,
    ShownStatus.RETRYING,
    ShownStatus.PROCESSING,
    ShownStatus.FAILED,
    ShownStatus.DEAD,
    ShownStatus.CANCELLED,
    ShownStatus.SKIPPED,
)

# Due now, on every configured lane: one range of the claim index each.
_DUE_BY_LANE = (
    "\n      + ".join(_bounded_count(f"{DUE_SQL} AND lane = '{lane.name}'") for lane in LANES)
    or "0"
)

QUEUE_DEPTH_SQL = f"""
SELECT
    {",\n    ".join(f'{_bounded_count(SHOWN_SQL[state])} AS "{state}"' for state in COUNTED)},
    least(
      {_DUE_BY_LANE},
      %(limit)s) AS "due_now",
    (SELECT greatest(reltuples, 0)::bigint FROM pg_class
      WHERE oid = 'notifications.notification_deliveries'::regclass) AS "estimated_rows",
    (SELECT freq FROM pg_stats,
            unnest(most_common_vals::text::text[], most_common_freqs) AS m(value, freq)
      WHERE schemaname = 'notifications' AND tablename = 'notification_deliveries'
        AND attname = 'status' AND value = '{Status.SENT}') AS "sent_share"
""".strip()

# Bounded too: the planner's row count is only as fresh as the last ANALYZE.
COUNT_SENT_SQL = f"SELECT {_bounded_count(SHOWN_SQL[ShownStatus.SENT])}"

EXACT_SENT_BELOW_ROWS = 200_000


@dataclass(frozen=True)
class QueueDepth:
    """Deliveries per ShownStatus (pending and retrying apart), plus due_now across every
    lane."""

    pending: int
    due_now: int
    retrying: int
    processing: int
    sent: int
    failed: int
    dead: int
    cancelled: int
    skipped: int
    sent_is_estimate: bool
    limit: int | None = None  # counts stopped here: a count equal to it means "at least"

    def as_dict(self) -> dict[str, int | bool | None]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def at_limit(self, name: str) -> bool:
        """Whether the count of name stopped at the limit (so there may be more)."""
        if name == "sent" and self.sent_is_estimate:
            return False  # not a count at all
        return self.limit is not None and getattr(self, name) >= self.limit


def queue_depth(*, limit: int | None = None) -> QueueDepth:
    """Count deliveries per status, plus the derived retrying and due-now.

    With a limit, no count goes past it, and `sent` is estimated once the table holds that
    many rows."""
    exact_sent_below = EXACT_SENT_BELOW_ROWS if limit is None else limit
    with connection.cursor() as cursor:
        cursor.execute(QUEUE_DEPTH_SQL, {"limit": limit})
        columns = [column.name for column in cursor.description]
        counts = dict(zip(columns, cursor.fetchone(), strict=True))
        estimated_rows = counts.pop("estimated_rows")
        sent_share = counts.pop("sent_share")
        others = sum(counts[name] for name in COUNTED)
        if limit is None and estimated_rows >= exact_sent_below:
            # Exact counts of the other states: what is left of the table is sent.
            sent, estimate = max(estimated_rows - others, 0), True
        elif limit is not None and estimated_rows >= exact_sent_below and sent_share:
            # The other counts stopped at the limit; ANALYZE's sample says how much is sent.
            sent, estimate = round(estimated_rows * sent_share), True
        else:
            # A small table, or one whose sample saw (almost) nothing sent: count them.
            cursor.execute(COUNT_SENT_SQL, {"limit": limit})
            sent, estimate = cursor.fetchone()[0], False
    return QueueDepth(**counts, sent=sent, sent_is_estimate=estimate, limit=limit)


# A failure is the recipient's when retrying cannot help (the row is `failed`: bad address,
# blocked, no recipient); it is the system's when a retryable fault hit us (the row is
# retrying, or `dead` after its budget).
CHANNEL_HEALTH_SQL = f"""
SELECT channel,
       count(*) FILTER (WHERE {SHOWN_SQL[ShownStatus.SENT]}) AS "sent",
       count(*) FILTER (
           WHERE {SHOWN_SQL[ShownStatus.DEAD]} OR {SHOWN_SQL[ShownStatus.RETRYING]}
       ) AS "system_failures",
       count(*) FILTER (WHERE {SHOWN_SQL[ShownStatus.FAILED]}) AS "recipient_failures",
       count(*) FILTER (WHERE {SHOWN_SQL[ShownStatus.DEAD]}) AS "dead"
FROM notifications.notification_deliveries
WHERE attempted_at >= now() - interval '24 hours'
GROUP BY channel
""".strip()


class Health(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"  # at least DEGRADED_AT of the last 24 hours' sends failed on our side
    UNHEALTHY = "unhealthy"  # at least UNHEALTHY_AT did, or a row went dead
    IDLE = "idle"  # nothing was attempted


DEGRADED_AT = 0.05
UNHEALTHY_AT = 0.25


@dataclass(frozen=True)
class ChannelHealth:
    channel: str
    sent: int = 0
    system_failures: int = 0
    recipient_failures: int = 0
    dead: int = 0
    # What people call the channel (Channel.label); its name when the site no longer runs it.
    label: str = ""

    @property
    def total(self) -> int:
        return self.sent + self.system_failures + self.recipient_failures

    @property
    def system_failure_rate(self) -> float:
        return self.system_failures / self.total if self.total else 0.0

    @property
    def tag(self) -> Health:
        """healthy, degraded (≥ 5 % system failures), unhealthy (≥ 25 %, or any dead), idle."""
        if self.total == 0:
            return Health.IDLE
        if self.dead or self.system_failure_rate >= UNHEALTHY_AT:
            return Health.UNHEALTHY
        if self.system_failure_rate >= DEGRADED_AT:
            return Health.DEGRADED
        return Health.HEALTHY


def channel_health() -> list[ChannelHealth]:
    """Return every configured channel's last 24 hours, idle ones included."""
    with connection.cursor() as cursor:
        cursor.execute(CHANNEL_HEALTH_SQL)
        rows = {row[0]: ChannelHealth(*row) for row in cursor.fetchall()}
    configured = channels.configured()
    names = sorted(set(configured) | set(rows))
    return [
        dataclasses.replace(
            rows.get(name, ChannelHealth(name)),
            label=configured[name].shown_label if name in configured else name,
        )
        for name in names
    ]


# The chart's outcomes, in the order they are stacked bottom-up.
OUTCOMES = tuple(OUTCOMES_BY_STATUS.values())

HOURLY_SQL = f"""
SELECT date_trunc('hour', attempted_at) AS "hour",
       {",\n       ".join(f'count(*) FILTER (WHERE {SHOWN_SQL[o]}) AS "{o}"' for o in OUTCOMES)}
FROM notifications.notification_deliveries
WHERE attempted_at >= date_trunc('hour', now()) - interval '23 hours'
GROUP BY 1
""".strip()


@dataclass(frozen=True)
class Hour:
    start: datetime
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def hourly() -> list[Hour]:
    """Return the last 24 hours (this one included), oldest first, by last attempt's outcome."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT date_trunc('hour', now())")
        this_hour = cursor.fetchone()[0]
        cursor.execute(HOURLY_SQL)
        found = {row[0]: dict(zip(OUTCOMES, row[1:], strict=True)) for row in cursor.fetchall()}
    hours = [this_hour - timedelta(hours=n) for n in range(23, -1, -1)]
    return [Hour(h, found.get(h, dict.fromkeys(OUTCOMES, 0))) for h in hours]


# The same rows as the "pending" count (ShownStatus.PENDING, never tried since queued or
# retried), read from their own index: a retrying row is counted under "retrying", and its
# age beside a "pending 0" would describe a row that count leaves out.
OLDEST_PENDING_SQL = f"""
SELECT now() - min(created_at) FROM notifications.notification_deliveries
WHERE {SHOWN_SQL[ShownStatus.PENDING]}
""".strip()


def oldest_pending_age() -> timedelta | None:
    """How long the oldest pending (not retrying) delivery has waited, to the second."""
    with connection.cursor() as cursor:
        cursor.execute(OLDEST_PENDING_SQL)
        age = cursor.fetchone()[0]
    return None if age is None else timedelta(seconds=round(age.total_seconds()))


# Read from the skipped rows' own index, which carries both columns (an index-only scan).
SKIPPED_SQL = f"""
SELECT channel, skip_reason, count(*) FROM notifications.notification_deliveries
WHERE {SHOWN_SQL[ShownStatus.SKIPPED]}
GROUP BY 1, 2
""".strip()


def skipped() -> dict[tuple[str, str], int]:
    """How many deliveries enqueue wrote as skipped, by (channel, reason): the rows kept
    until retention prunes them, as sent rows are."""
    with connection.cursor() as cursor:
        cursor.execute(SKIPPED_SQL)
        return {(channel, reason): count for channel, reason, count in cursor.fetchall()}


def table_bytes() -> int:
    """The deliveries table's size on disk, its indexes and TOAST included."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('notifications.notification_deliveries')")
        return cursor.fetchone()[0]
