"""The admin's queue dashboard: notifications/stats.py's numbers, laid out for the page
(the chart's geometry is computed here, so the template only draws rectangles)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils import formats, timezone

from notifications import heartbeat, retention, stats


@dataclass(frozen=True)
class Bar:
    """One hour of the chart, as SVG rectangles stacked bottom-up."""

    x: float
    label: str
    title: str
    segments: list[tuple[str, float, float]] = field(default_factory=list)  # outcome, y, height


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
                segments.append((outcome, round(y, 2), round(height, 2)))
        start = timezone.localtime(hour.start)
        title = f"{start:%H:00} — " + ", ".join(
            f"{outcome.label}: {formats.number_format(hour.counts[outcome], force_grouping=True)}"
            for outcome in stats.OUTCOMES
        )
        bars.append(Bar(round(index * step, 2), f"{start:%H}", title, segments))
    return bars


def probeable() -> set[str]:
    from notifications import channels

    return {name for name, c in channels.configured().items() if hasattr(c, "probe")}


def snapshot() -> dict:
    """Everything the dashboard shows, read in a handful of index-backed statements."""
    hours = stats.hourly()
    bars = chart(hours)
    return {
        "depth": stats.queue_depth(),
        "loop": heartbeat.status(),
        "oldest_pending": stats.oldest_pending_age(),
        "health": stats.channel_health(),
        # Channels whose provider has an identity endpoint to call: the "Probe" buttons.
        "probes": probeable(),
        "table_bytes": stats.table_bytes(),
        "last_prune": retention.last_run(),
        "bars": bars,
        "hour_labels": [bar.label for bar in bars[::LABEL_EVERY]],
        "chart_width": CHART_WIDTH,
        "chart_height": CHART_HEIGHT,
        "bar_width": round(CHART_WIDTH / len(hours) - 2, 2),
        "hours_total": sum(h.total for h in hours),
        "outcome_labels": [(o.value, o.label) for o in stats.OUTCOMES],
    }
