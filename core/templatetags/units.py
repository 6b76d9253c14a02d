"""Quantities with units, in the reader's language: `{% load units %}`, then
`{{ age|duration }}` for a timedelta ("1 min 9 s", "1 мин 9 с", "1 Min. 9 s")."""

from __future__ import annotations

import math
from datetime import timedelta

from django import template
from django.utils import formats
from django.utils.translation import pgettext

register = template.Library()

SECOND = 1
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

# A duration is shown in its two largest units, rounded to the smaller of them: under a minute
# in seconds, under an hour in minutes and seconds, under a day in hours and minutes, beyond in
# days and hours. The smaller unit is left out when it is zero ("2 h", not "2 h 0 min").
SCALES = (
    # (shown while the rounded duration is below this, larger unit, smaller unit), in seconds
    (MINUTE, None, SECOND),
    (HOUR, MINUTE, SECOND),
    (DAY, HOUR, MINUTE),
    (math.inf, DAY, HOUR),
)


def duration_parts(seconds: float) -> list[tuple[int, int]]:
    """Return (count, unit in seconds) pairs, largest first: 69 → [(1, MINUTE), (9, SECOND)]."""
    seconds = max(seconds, 0.0)
    for below, larger, smaller in SCALES:
        # Half up, never to even: 0.5 s is 1 s, like 1.5 s is 2 s.
        smaller_units = math.floor(seconds / smaller + 0.5)
        # Rounding may carry into the next scale (59.6 s is 1 min): test the rounded value.
        if smaller_units * smaller >= below:
            continue
        if larger is None:
            return [(smaller_units, smaller)]
        big, small = divmod(smaller_units, larger // smaller)
        return [(big, larger), (small, smaller)] if small else [(big, larger)]
    raise AssertionError("the last scale has no upper bound")


def quantity(count: int, unit: int) -> str:
    """One number with its unit's abbreviation ("9 s", "9 с"): abbreviations take no plural in
    English, Russian or German. The number is grouped the language's way, and no-break spaces
    tie it to its unit, so a line never ends between them."""
    number = formats.number_format(count, force_grouping=True)
    text = {
        SECOND: pgettext("unit of time", "%(count)s s"),
        MINUTE: pgettext("unit of time", "%(count)s min"),
        HOUR: pgettext("unit of time", "%(count)s h"),
        DAY: pgettext("unit of time", "%(count)s d"),
    }[unit] % {"count": number}
    return text.replace(" ", "\u00a0")


@register.filter
def duration(value: timedelta | float | None) -> str:
    """A timedelta (or a number of seconds) as "1 min 9 s", in the active language."""
    if value is None or value == "":
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return " ".join(quantity(count, unit) for count, unit in duration_parts(seconds))
