"""Provider rate limits shared by every drain, on every host: slots reserved in PostgreSQL.

A provider that limits our rate (Telegram's 30 messages a second per bot) answers 429 past
it, and each drain alone cannot know what the others send. So the drains share one clock per
provider account, the row of notifications.provider_rates under the account's key: its
next_slot_at is the earliest moment the next send may start (GCRA's "theoretical arrival
time"). reserve() hands a batch up to `count` slots 1/rate apart from there, none further
than `horizon` seconds ahead, and moves next_slot_at past them; hold() pushes next_slot_at
out when the provider asked for a pause (a 429's Retry-After), so every drain pauses.

No burst: a slot is never earlier than next_slot_at, so a key idle for a while starts again
at its rate, not with a second's worth at once. The providers publish a rate, not a bucket
size, and a 429 costs more (a pause of at least a second for every drain) than a burst
could win (a fraction of a second at the start of a broadcast).

Each reservation and hold is one statement, its own transaction, computed on the database's
clock (clock_timestamp(), so two drains on two hosts agree on "now"): it works through
PgBouncer in transaction pooling, and holds the row's lock for the statement only. (A key's
first reservation in a process is preceded by one more, which makes sure its row exists.)
Each drain turns the slots into its own time.monotonic() through _DatabaseClock.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)

# How far ahead a batch takes slots. Further slots would hold their rows, and a sender
# thread, waiting; those rows go back to the queue until about when the key is free, for
# whichever drain claims them then.
HORIZON = 4.0  # seconds
# The share of a provider's rate the slots use. The provider counts sends when they reach it,
# and they reach it a little early or late of their slots (a thread's wake-up, the network),
# so slots at exactly its rate would now and then put one too many in its second; a 429 then
# pauses every drain for a whole second (Retry-After is in seconds). 5% below the rate leaves
# 30 sends at Telegram's 30 a second 50 ms of slack.
HEADROOM = 0.95
# The most a send may start after its slot. A sender that wakes late (its process was not
# scheduled, say) would send at once, together with the next slots' sends: a burst the
# provider counts in one second. Past this, the slot is given up and the row goes back to
# the queue instead, which costs one slot rather than a 429's second for every drain. Half
# of HEADROOM's slack, so that lateness and the network's jitter together stay within it.
LATE = 0.025  # seconds

# The row is locked first (FOR UPDATE waits for, then sees, a concurrent reservation), so
# `plan` is computed from the latest next_slot_at and the RETURNING says what was granted.
# ON CONFLICT computes the same from the row it meets: they differ only when the key's first
# row was inserted by another drain between the lock and the insert (then `old` is empty and
# the row was not inserted by this statement), which reserve() counts as nothing granted.
# NEW_KEY_SQL makes the row once per key and process beforehand, so that hardly happens.
RESERVE_SQL = """
WITH old AS (
    SELECT next_slot_at FROM notifications.provider_rates WHERE key = %(key)s FOR UPDATE
),
clock AS (
    -- Read once the lock is held (old is scanned first), so that a wait for another drain's
    -- reservation does not make every slot of this one late.
    SELECT clock_timestamp() AS now FROM (SELECT count(*) FROM old) AS locked
),
start AS (
    SELECT clock.now, greatest((SELECT next_slot_at FROM old), clock.now) AS first
    FROM clock
),
plan AS (
    SELECT now, first,
           least(%(count)s, greatest(0, floor(
               extract(epoch FROM now - first) * %(rate)s + %(horizon)s * %(rate)s
           )::integer + 1)) AS granted
    FROM start
)
INSERT INTO notifications.provider_rates AS r (key, next_slot_at, updated_at)
SELECT %(key)s, first + make_interval(secs => granted / %(rate)s), now
FROM plan
ON CONFLICT (key) DO UPDATE
SET next_slot_at = greatest(r.next_slot_at, EXCLUDED.updated_at) + make_interval(
        secs => least(%(count)s, greatest(0, floor(
            extract(epoch FROM EXCLUDED.updated_at - greatest(r.next_slot_at, EXCLUDED.updated_at))
            * %(rate)s + %(horizon)s * %(rate)s
        )::integer + 1)) / %(rate)s
    ),
    updated_at = EXCLUDED.updated_at
RETURNING (SELECT extract(epoch FROM first - now) FROM plan),
          (SELECT granted FROM plan),
          extract(epoch FROM r.next_slot_at - r.updated_at),
          EXISTS (SELECT 1 FROM old) OR r.xmax = 0,
          (SELECT extract(epoch FROM now) FROM plan)
""".strip()

NEW_KEY_SQL = """
INSERT INTO notifications.provider_rates (key, next_slot_at, updated_at)
VALUES (%(key)s, clock_timestamp(), clock_timestamp())
ON CONFLICT (key) DO NOTHING
""".strip()

# The keys this process has made sure have a row (rows are never deleted).
_known: set[str] = set()

HOLD_SQL = """
INSERT INTO notifications.provider_rates AS r (key, next_slot_at, updated_at)
SELECT %(key)s, now + make_interval(secs => %(seconds)s), now
FROM (SELECT clock_timestamp() AS now) AS clock
ON CONFLICT (key) DO UPDATE
SET next_slot_at = greatest(r.next_slot_at, EXCLUDED.next_slot_at),
    updated_at = EXCLUDED.updated_at
RETURNING extract(epoch FROM r.next_slot_at - r.updated_at)
""".strip()


@dataclass(frozen=True)
class Reservation:
    """What reserve() granted: when each granted send may start, in seconds from now (on
    the database's clock, when it answered), earliest first; and in how many seconds the
    key's next slot comes, after them (when sends not granted are worth trying again)."""

    starts: list[float]
    next_free: float
    # The database's "now" of the reservation on this process's time.monotonic() clock:
    # send i may start at now_at + starts[i].
    now_at: float = 0.0


class _DatabaseClock:
    """Where the database's clock stands on this process's time.monotonic().

    Two drains that turned the same slots into local times with different errors would send
    too close together: taking "now" as the moment the answer arrived makes one drain's slots
    late by however long its answer took (a starved process reads it tens of milliseconds
    late), and the next drain's first sends then crowd its last. So the offset (monotonic
    minus database epoch) is bounded by every reservation's round trip, since the database
    read its clock after the statement left and before the answer came; the tightest bounds
    so far win, as in NTP's clock filter, and widen by DRIFT a second for clocks that drift.
    """

    DRIFT = 0.0005  # 500 ppm: the most an NTP-disciplined clock is slewed

    def __init__(self) -> None:
        self.low, self.high, self.at = -math.inf, math.inf, 0.0
        self.lock = threading.Lock()

    def sample(self, *, sent: float, answered: float, database_now: float) -> float:
        """Take one round trip into account; return database_now on the monotonic clock."""
        with self.lock:
            widen = (answered - self.at) * self.DRIFT
            low = max(self.low - widen, sent - database_now)
            high = min(self.high + widen, answered - database_now)
            if low > high:  # a jump on either clock: start again from this round trip
                low, high = sent - database_now, answered - database_now
            self.low, self.high, self.at = low, high, answered
            return database_now + (low + high) / 2


_clock = _DatabaseClock()


def reserve(key: str, *, rate: float, count: int, horizon: float = HORIZON) -> Reservation:
    """Reserve up to count sends under key at rate a second, none starting later than
    horizon seconds from now; the sends not granted must not be made (hand them back)."""
    _check(key=key, rate=rate)
    if count < 1:
        return Reservation(starts=[], next_free=0.0)
    params = {"key": key, "rate": float(rate), "count": count, "horizon": max(horizon, 0.0)}
    with connection.cursor() as cursor:
        if key not in _known:
            cursor.execute(NEW_KEY_SQL, {"key": key})
            _known.add(key)
        sent = time.monotonic()
        cursor.execute(RESERVE_SQL, params)
        first, granted, next_free, planned, database_now = cursor.fetchone()
    now_at = _clock.sample(sent=sent, answered=time.monotonic(), database_now=float(database_now))
    first, next_free = float(first), max(float(next_free), 0.0)
    if not planned:
        # The key's row appeared mid-statement: what ON CONFLICT granted is unknown, so
        # nothing is used (those slots go to waste, once per key's lifetime at most).
        return Reservation(starts=[], next_free=next_free, now_at=now_at)
    interval = 1.0 / rate
    starts = [max(first + i * interval, 0.0) for i in range(granted)]
    return Reservation(starts=starts, next_free=next_free, now_at=now_at)


def hold(key: str, *, seconds: float) -> float:
    """Start no send under key for seconds from now, in any drain (a 429's Retry-After);
    a later next slot already reserved stays. Return the seconds until the next slot."""
    _check(key=key, rate=1.0)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be a finite number of at least 0, not {seconds!r}")
    with connection.cursor() as cursor:
        cursor.execute(HOLD_SQL, {"key": key, "seconds": float(seconds)})
        (until,) = cursor.fetchone()
    return max(float(until), 0.0)


def _check(*, key: str, rate: float) -> None:
    if not key or len(key) > 200:
        raise ValueError(f"a pacing key is 1 to 200 characters, not {len(key)}")
    if not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a positive number of sends a second, not {rate!r}")


@dataclass(frozen=True)
class Unslotted:
    """Items reserve() did not grant under key: to be handed back to the queue, worth trying
    again after delay seconds; delay None when the database did not answer."""

    key: str
    items: list
    delay: float | None


def schedule(items: list, *, pace_of, horizon: float) -> tuple[list[tuple], list[Unslotted]]:
    """Reserve slots for a batch's items: one reserve() per key, for all of its items.

    pace_of(item) is the item's Pace or None; its slots use HEADROOM of its rate. Return
    (timed, refused): timed holds (item, start, key) for every item that may be sent, start
    a time.monotonic() value before which it must not (None, as key, for an unpaced item),
    paced items first, by slot, then the unpaced: a slot is every drain's, and a sender busy
    with unpaced sends when it comes would burn it; refused the items past the horizon, by
    key."""
    unpaced: list[tuple] = []
    by_key: dict[str, tuple[float, list]] = {}
    for item in items:
        pace = pace_of(item)
        if pace is None:
            unpaced.append((item, None, None))
        else:
            by_key.setdefault(pace.key, (pace.rate, []))[1].append(item)
    paced: list[tuple] = []
    refused: list[Unslotted] = []
    for key, (rate, group) in by_key.items():
        try:
            got = reserve(key, rate=rate * HEADROOM, count=len(group), horizon=horizon)
        except DatabaseError as exc:
            logger.warning("could not reserve %d sends under %s: %s", len(group), key, exc)
            refused.append(Unslotted(key, group, None))
            continue
        paced += [
            (item, got.now_at + start, key) for item, start in zip(group, got.starts, strict=False)
        ]
        if len(got.starts) < len(group):
            refused.append(Unslotted(key, group[len(got.starts) :], got.next_free))
    paced.sort(key=lambda timed: timed[1])
    return paced + unpaced, refused
