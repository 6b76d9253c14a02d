"""core/templatetags/units.py: durations rounded to their two largest units, in the reader's
language (the staff console's dashboard is its first user)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.template import Context, Template
from django.utils import translation

from core.templatetags.units import DAY, HOUR, MINUTE, SECOND, duration, duration_parts


@pytest.mark.parametrize(
    ("seconds", "parts"),
    [
        (0, [(0, SECOND)]),
        (-3, [(0, SECOND)]),  # a clock a little ahead of the database: never negative
        (0.4, [(0, SECOND)]),
        (0.5, [(1, SECOND)]),  # half up, not to even
        (9, [(9, SECOND)]),
        (59.4, [(59, SECOND)]),
        (59.6, [(1, MINUTE)]),  # rounds to 60 s: the next scale, and its zero seconds left out
        (60, [(1, MINUTE)]),
        (69, [(1, MINUTE), (9, SECOND)]),  # 60 + 9
        (3599, [(59, MINUTE), (59, SECOND)]),  # 59 × 60 + 59
        (3599.6, [(1, HOUR)]),
        (3629, [(1, HOUR)]),  # 1 h 0 min 29 s: the minutes round down to none
        (3630, [(1, HOUR), (1, MINUTE)]),  # 1 h 0 min 30 s: half a minute rounds up
        (2 * 3600 + 5 * 60, [(2, HOUR), (5, MINUTE)]),
        (86_399, [(1, DAY)]),  # 23 h 59 min 59 s rounds to 24 h
        (86_400 + 4 * 3600 + 1799, [(1, DAY), (4, HOUR)]),  # 29 min 59 s round down
        (86_400 + 4 * 3600 + 1800, [(1, DAY), (5, HOUR)]),  # and 30 min up
        (1234 * 86_400, [(1234, DAY)]),
    ],
)
def test_duration_parts(seconds, parts):
    assert duration_parts(seconds) == parts


@pytest.mark.parametrize(
    ("language", "value", "shown"),
    [
        ("en", timedelta(seconds=69), "1 min 9 s"),
        ("ru", timedelta(seconds=69), "1 мин 9 с"),
        ("de", timedelta(seconds=69), "1 Min. 9 s"),
        ("en", timedelta(hours=2, minutes=5), "2 h 5 min"),
        ("ru", timedelta(hours=2, minutes=5), "2 ч 5 мин"),
        ("de", timedelta(hours=2, minutes=5), "2 Std. 5 Min."),
        ("en", timedelta(days=3, hours=4), "3 d 4 h"),
        ("ru", timedelta(days=3, hours=4), "3 дн. 4 ч"),
        ("de", timedelta(days=3, hours=4), "3 Tg. 4 Std."),
        # Grouped the language's way.
        ("en", timedelta(days=1234), "1,234 d"),
        ("ru", timedelta(days=1234), "1\u00a0234 дн."),
        ("de", timedelta(days=1234), "1.234 Tg."),
        # A number of seconds works too.
        ("en", 9.2, "9 s"),
    ],
)
def test_duration_speaks_the_active_language(language, value, shown):
    with translation.override(language):
        # A no-break space ties each number to its unit.
        assert duration(value) == re.sub(r"(\d) (\D)", "\\1\u00a0\\2", shown)


def test_the_filter_loads_in_a_template_and_shows_nothing_for_no_value():
    template = Template("{% load units %}[{{ age|duration }}][{{ none|duration }}]")
    with translation.override("ru"):
        shown = template.render(Context({"age": timedelta(seconds=9), "none": None}))
    assert shown == "[9\u00a0с][]"
