"""Quiet hours: when a delivery due inside a recipient's nightly window may be sent instead.

The window is a wall-clock one ("22:00–07:00 in Europe/Berlin"), so its end is found in the
recipient's time zone and turned back into an instant by the database, on its own clock and
its own time-zone rules, the same clock the claim compares next_attempt_at with. PostgreSQL's
`timestamp AT TIME ZONE zone` does the DST arithmetic: on the night the clocks go back, 22:00
to 07:00 lasts nine hours; on the night they go forward, seven.

A local time the clocks skip (02:30 on the spring night in Berlin) is read as the same time on
the offset before the jump, so a window ending then ends at 03:30 summer time; a local time
that happens twice (02:30 on the autumn night) is read as the later one. Either way a held
delivery waits a little longer, never shorter.
"""

from __future__ import annotations

import json
import logging
import zoneinfo
from collections.abc import Sequence
from datetime import datetime, time
from typing import NamedTuple

from django.db import connection

log = logging.getLogger(__name__)

# One row per window asked about: the zone, the window's start and end, and when the delivery
# is due (null: now). A due time already past means now, as for send_at. One statement for a
# drain's whole batch (every recipient whose quiet hours may hold one of its rows).
HELD_UNTIL_SQL = """
WITH due AS (
    SELECT w.ord, w.zone, w.start, w."end",
           (GREATEST(now(), COALESCE(w.due, now())) AT TIME ZONE w.zone) AS local
    FROM jsonb_to_recordset(%(windows)s::jsonb)
        AS w(ord integer, zone text, start time, "end" time, due timestamptz)
)
SELECT ord, CASE
    WHEN start < "end" THEN
        -- A window inside one day (13:00–15:00): it ends the same day.
        CASE WHEN local::time >= start AND local::time < "end"
            THEN (local::date + "end") AT TIME ZONE zone END
    ELSE
        -- A window across midnight (22:00–07:00): before midnight it ends tomorrow.
        CASE
            WHEN local::time >= start THEN (local::date + 1 + "end") AT TIME ZONE zone
            WHEN local::time < "end" THEN (local::date + "end") AT TIME ZONE zone
        END
END
FROM due
"""


class Hours(NamedTuple):
    """A recipient's quiet hours: wall-clock start and end in time_zone (an IANA name)."""

    time_zone: str
    start: time
    end: time


def held_until(*, time_zone: str, start: time, end: time, due: datetime | None) -> datetime | None:
    """The end of the quiet window when a delivery due at due (None: now, by the database
    clock) falls inside it; None when it does not.

    The window runs from start to end, wall-clock times in time_zone (an IANA name). A zone
    neither Python nor the database knows cannot have been saved through the preference
    centre or the admin; if one is stored anyway, the window is read in UTC and logged.
    """
    if due is not None and due.utcoffset() is None:
        raise ValueError("due must be an aware datetime.")
    return held_until_each([(Hours(time_zone, start, end), due)])[0]


def held_until_each(
    asked: Sequence[tuple[Hours, datetime | None]],
) -> list[datetime | None]:
    """held_until() for each (window, due) of asked, in one statement: the end of the window
    where the delivery falls inside it, else None, in the order asked."""
    if not asked:
        return []
    rows = []
    for place, (window, due) in enumerate(asked):
        if window.start == window.end:
            raise ValueError("A quiet window needs different start and end times.")
        rows.append(
            {
                "ord": place,
                "zone": _known_zone(window.time_zone),
                "start": window.start.isoformat(),
                "end": window.end.isoformat(),
                "due": None if due is None else due.isoformat(),
            }
        )
    with connection.cursor() as cursor:
        cursor.execute(HELD_UNTIL_SQL, {"windows": json.dumps(rows)})
        found = dict(cursor.fetchall())
    return [found[place] for place in range(len(rows))]


def _known_zone(name: str) -> str:
    # A zone the database does not know would fail the whole statement, and with it a drain's
    # batch: read it as UTC instead.
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        log.warning("Unknown time zone %r in a recipient's quiet hours; read as UTC.", name)
        return "UTC"
    return name
