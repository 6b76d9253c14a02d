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

import logging
import zoneinfo
from datetime import datetime, time

from django.db import connection

log = logging.getLogger(__name__)

# $1 the zone, $2 the window's start, $3 its end, $4 when the delivery is due (null: now).
# A due time already past means now, as for send_at.
HELD_UNTIL_SQL = """
WITH due AS (
    SELECT (GREATEST(now(), COALESCE(%(due)s::timestamptz, now())) AT TIME ZONE %(zone)s)
        AS local
)
SELECT CASE
    WHEN %(start)s::time < %(end)s::time THEN
        -- A window inside one day (13:00–15:00): it ends the same day.
        CASE WHEN local::time >= %(start)s::time AND local::time < %(end)s::time
            THEN (local::date + %(end)s::time) AT TIME ZONE %(zone)s END
    ELSE
        -- A window across midnight (22:00–07:00): before midnight it ends tomorrow.
        CASE
            WHEN local::time >= %(start)s::time
                THEN (local::date + 1 + %(end)s::time) AT TIME ZONE %(zone)s
            WHEN local::time < %(end)s::time
                THEN (local::date + %(end)s::time) AT TIME ZONE %(zone)s
        END
END
FROM due
"""


def held_until(*, time_zone: str, start: time, end: time, due: datetime | None) -> datetime | None:
    """The end of the quiet window when a delivery due at due (None: now, by the database
    clock) falls inside it; None when it does not.

    The window runs from start to end, wall-clock times in time_zone (an IANA name). A zone
    neither Python nor the database knows cannot have been saved through the preference
    centre or the admin; if one is stored anyway, the window is read in UTC and logged.
    """
    if start == end:
        raise ValueError("A quiet window needs different start and end times.")
    if due is not None and due.utcoffset() is None:
        raise ValueError("due must be an aware datetime.")
    try:
        zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        log.warning("Unknown time zone %r in a recipient's quiet hours; read as UTC.", time_zone)
        time_zone = "UTC"
    with connection.cursor() as cursor:
        cursor.execute(HELD_UNTIL_SQL, {"zone": time_zone, "start": start, "end": end, "due": due})
        (until,) = cursor.fetchone()
    return until
