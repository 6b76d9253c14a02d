"""A digest's windows: when what a recipient gathers of a category goes out.

Windows are wall-clock ones in the recipient's time zone ("daily at 09:00 in Europe/Berlin"),
turned into instants by the database, on the same clock the claim reads: on the night the
clocks change, a daily window lasts 23 or 25 hours and still ends at 09:00. The carriers that
wait for a window's end are the engine's (notifications/digests.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from recipients.models import Cadence


@dataclass(frozen=True)
class Digest:
    """A recipient's digest for one category: how often, and when (their clock)."""

    cadence: str
    hour: int | None = None
    weekday: int | None = None  # 0 Monday … 6 Sunday


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime


# $zone the recipient's zone; $at the instant the window must contain (null, or a time already
# past: now); $hour and
# $weekday as DigestChoice stores them (weekday 0 = Monday, ISO's isodow 1). The window is the
# one whose end is the first boundary strictly after $at, so $at equal to a boundary opens the
# next window, which is how a join walks past a claimed carrier.
WINDOW_SQL = """
WITH here AS (
    SELECT (greatest(now(), coalesce(%(at)s::timestamptz, now())) AT TIME ZONE %(zone)s)
        AS local
),
boundary AS (
    SELECT CASE %(cadence)s
        WHEN 'hourly' THEN date_trunc('hour', local) + interval '1 hour'
        WHEN 'daily' THEN local::date + make_time(%(hour)s, 0, 0)
            + CASE WHEN local::time >= make_time(%(hour)s, 0, 0)
                THEN interval '1 day' ELSE interval '0' END
        WHEN 'weekly' THEN local::date + make_time(%(hour)s, 0, 0)
            + make_interval(days => CASE
                WHEN (%(weekday)s + 1 - extract(isodow FROM local)::int + 7) %% 7 = 0
                     AND local::time >= make_time(%(hour)s, 0, 0) THEN 7
                ELSE (%(weekday)s + 1 - extract(isodow FROM local)::int + 7) %% 7
            END)
    END AS local_end
    FROM here
)
SELECT (local_end - CASE %(cadence)s
            WHEN 'hourly' THEN interval '1 hour'
            WHEN 'daily' THEN interval '1 day'
            ELSE interval '7 days' END) AT TIME ZONE %(zone)s,
       local_end AT TIME ZONE %(zone)s
FROM boundary
""".strip()


def window(digest: Digest, *, time_zone: str, at: datetime | None = None) -> Window:
    """The digest window that at (None: now, by the database clock) falls in, in time_zone."""
    if digest.cadence not in (Cadence.HOURLY, Cadence.DAILY, Cadence.WEEKLY):
        raise ValueError(f"{digest.cadence!r} has no window.")
    hour = 0 if digest.hour is None else digest.hour
    weekday = 0 if digest.weekday is None else digest.weekday
    with connection.cursor() as cursor:
        cursor.execute(
            WINDOW_SQL,
            {
                "at": at,
                "zone": time_zone,
                "cadence": str(digest.cadence),
                "hour": hour,
                "weekday": weekday,
            },
        )
        start, end = cursor.fetchone()
    return Window(start, end)
