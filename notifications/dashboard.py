"""The admin's queue dashboard: notifications/stats.py's numbers, laid out for the page
(the chart's geometry is computed here, so the template only draws rectangles).

The geometry leaves here as text written the one way SVG reads numbers. A float printed by a
template takes the reader's decimal comma (x="660,0" in Russian or German), which SVG cannot
parse, and the chart came out empty in those languages."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils import formats, timezone

from notifications import heartbeat, retention, stats
from notifications.models import SkipReason


def coordinate(value: float) -> str:
    """A number as SVG and CSS read it, whatever the language: 53.33, never 53,33."""
    return f"{round(value, 2) + 0.0:.2f}".rstrip("0").rstrip(".")  # + 0.0: no "-0"


@dataclass(frozen=True)
class Bar:
    """One hour of the chart, as SVG rectangles stacked bottom-up (coordinates as text)."""

    x: str
    label: str
    title: str
    segments: list[tuple[str, str, str]] = field(default_factory=list)  # outcome, y, height


@dataclass(frozen=True)
class AxisMark:
    """A mark on the chart's count axis: where (an SVG y) and what it reads, for people."""

    y: str
    label: str
    position: str  # "top", "middle" or "bottom": where the HTML label sits beside the chart


CHART_WIDTH = 720
CHART_HEIGHT = 160
# Every third hour is labelled, below the chart in HTML: text inside the SVG would shrink with
# it (to about 6 px on a phone), while these keep the page's font size at any width.
LABEL_EVERY = 3


def chart(hours: list[stats.Hour]) -> list[Bar]:
    """Lay out the hourly counts as stacked bars in a CHART_WIDTH × CHART_HEIGHT box.

    Each bar's title is in the active language: an outcome's label and its count."""
    peak = max((h.total for h in hours), default=0) or 1
    step = CHART_WIDTH / len(hours)
    bars = []
    for index, hour in enumerate(hours):
        y = float(CHART_HEIGHT)
        segments = []
        for outcome in stats.OUTCOMES:
            height = CHART_HEIGHT * hour.counts[outcome] / peak
            if height:
                y -= height
                segments.append((outcome, coordinate(y), coordinate(height)))
        start = timezone.localtime(hour.start)
        title = f"{start:%H:00} — " + ", ".join(
            f"{outcome.label}: {formats.number_format(hour.counts[outcome], force_grouping=True)}"
            for outcome in stats.OUTCOMES
        )
        bars.append(Bar(coordinate(index * step), f"{start:%H}", title, segments))
    return bars


def ticks(hours: list[stats.Hour]) -> list[AxisMark]:
    """The count axis: 0, half the busiest hour and the busiest hour, top first, so one busy
    hour still leaves the others readable against a scale. The labels are in the reader's
    language (1,5 in German); only the SVG y is plain."""
    peak = max((h.total for h in hours), default=0)
    if not peak:
        return []
    marks = [
        (peak, 0.0, "top"),
        (peak / 2, CHART_HEIGHT / 2, "middle"),
        (0, CHART_HEIGHT, "bottom"),
    ]
    return [
        AxisMark(
            coordinate(y),
            formats.number_format(
                value, decimal_pos=0 if value == int(value) else 1, force_grouping=True
            ),
            position,
        )
        for value, y, position in marks
    ]


def probeable() -> set[str]:
    """The configured channels that can ask their provider who the site is (Channel.probes)."""
    import transports as channels

    return {name for name, c in channels.configured().items() if c.probes}


@dataclass(frozen=True)
class SkippedCount:
    """How many deliveries enqueue wrote as skipped for one reason, all channels together."""

    value: str
    label: str
    count: int


def skipped_by_reason() -> list[SkippedCount]:
    """Every skip reason, in SkipReason's order, with its count (0 included)."""
    counts: dict[str, int] = {}
    for (_channel, reason), count in stats.skipped().items():
        counts[reason] = counts.get(reason, 0) + count
    return [SkippedCount(r.value, r.label, counts.get(r.value, 0)) for r in SkipReason]


def snapshot() -> dict:
    """Everything the dashboard shows, read in a handful of index-backed statements."""
    hours = stats.hourly()
    bars = chart(hours)
    return {
        "depth": stats.queue_depth(),
        "loop": heartbeat.status(),
        "oldest_pending": stats.oldest_pending_age(),
        "skipped": skipped_by_reason(),
        "health": stats.channel_health(),
        # Channels whose provider has an identity endpoint to call: the "Probe" buttons.
        "probes": probeable(),
        "table_bytes": stats.table_bytes(),
        "last_prune": retention.last_run(),
        "bars": bars,
        "ticks": ticks(hours),
        "hour_labels": [bar.label for bar in bars[::LABEL_EVERY]],
        "chart_width": CHART_WIDTH,
        "chart_height": CHART_HEIGHT,
        "bar_width": coordinate(CHART_WIDTH / len(hours) - 2),
        "hours_total": sum(h.total for h in hours),
        "outcome_labels": [(o.value, o.label) for o in stats.OUTCOMES],
    }
