"""The numbers on the admin's queue dashboard: channel health and deliveries per hour.

Both read only the last 24 hours of attempts through the deliveries_attempted index, so they
cost the same on a table of a thousand rows or a million.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db import connection

from notifications import heartbeat, outbox
from notifications.models import RETRYING_SQL, ShownStatus

# A failure is the recipient's when retrying cannot help (the row is `failed`: bad address,
# blocked, no recipient); it is the system's when a retryable fault hit us (the row is
# retrying, or `dead` after its budget).
CHANNEL_HEALTH_SQL = f"""
SELECT channel,
       count(*) FILTER (WHERE status = 'sent') AS "sent",
       count(*) FILTER (WHERE status = 'dead' OR {RETRYING_SQL}) AS "system_failures",
       count(*) FILTER (WHERE status = 'failed') AS "recipient_failures",
       count(*) FILTER (WHERE status = 'dead') AS "dead"
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
    names = sorted(set(settings.DELIVERY_CHANNELS) | set(rows))
    return [rows.get(name, ChannelHealth(name)) for name in names]


HOURLY_SQL = f"""
SELECT date_trunc('hour', attempted_at) AS "hour",
       count(*) FILTER (WHERE status = 'sent') AS "sent",
       count(*) FILTER (WHERE {RETRYING_SQL}) AS "retrying",
       count(*) FILTER (WHERE status = 'failed') AS "failed",
       count(*) FILTER (WHERE status = 'dead') AS "dead"
FROM notifications.notification_deliveries
WHERE attempted_at >= date_trunc('hour', now()) - interval '23 hours'
GROUP BY 1
""".strip()

OUTCOMES = (ShownStatus.SENT, ShownStatus.RETRYING, ShownStatus.FAILED, ShownStatus.DEAD)


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


OLDEST_PENDING_SQL = """
SELECT now() - min(created_at) FROM notifications.notification_deliveries
WHERE status = 'pending'
""".strip()


def oldest_pending_age() -> timedelta | None:
    """How long the oldest pending delivery has waited, to the second."""
    with connection.cursor() as cursor:
        cursor.execute(OLDEST_PENDING_SQL)
        age = cursor.fetchone()[0]
    return None if age is None else timedelta(seconds=round(age.total_seconds()))


@dataclass(frozen=True)
class Bar:
    """One hour of the chart, as SVG rectangles stacked bottom-up."""

    x: float
    label: str
    title: str
    segments: list[tuple[str, float, float]] = field(default_factory=list)  # outcome, y, height


CHART_WIDTH = 720
CHART_HEIGHT = 160


def chart(hours: list[Hour]) -> list[Bar]:
    """Lay out the hourly counts as stacked bars in a CHART_WIDTH × CHART_HEIGHT box."""
    peak = max((h.total for h in hours), default=0) or 1
    step = CHART_WIDTH / len(hours)
    bars = []
    for index, hour in enumerate(hours):
        y = float(CHART_HEIGHT)
        segments = []
        for outcome in OUTCOMES:
            height = CHART_HEIGHT * hour.counts[outcome] / peak
            if height:
                y -= height
                segments.append((outcome, round(y, 2), round(height, 2)))
        title = f"{hour.start:%H:00} — " + ", ".join(
            f"{outcome} {hour.counts[outcome]}" for outcome in OUTCOMES
        )
        bars.append(Bar(round(index * step, 2), f"{hour.start:%H}", title, segments))
    return bars


def snapshot() -> dict:
    """Everything the dashboard shows, read in a handful of index-backed statements."""
    hours = hourly()
    return {
        "depth": outbox.queue_depth(),
        "loop": heartbeat.status(),
        "oldest_pending": oldest_pending_age(),
        "health": channel_health(),
        "bars": chart(hours),
        "chart_width": CHART_WIDTH,
        "chart_height": CHART_HEIGHT,
        "bar_width": round(CHART_WIDTH / len(hours) - 2, 2),
        "hours_total": sum(h.total for h in hours),
        "outcome_labels": [(o.value, o.label) for o in OUTCOMES],
    }
