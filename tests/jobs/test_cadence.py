"""A cadence in words (jobs/cadence.py), where cron-descriptor's own words are no sentence a
native would write: a minute past every hour."""

from __future__ import annotations

import pytest
from django.utils import translation

from jobs import cadence


@pytest.mark.parametrize(
    ("language", "expression", "said"),
    [
        ("en", "17 * * * *", "At 17 minutes past the hour"),
        ("en", "1 * * * *", "At 1 minute past the hour"),
        # Russian's minute agrees with its number: 1 and 21 минуту, 2-4 and 22 минуты, else минут.
        ("ru", "17 * * * *", "Каждый час в 17 минут"),
        ("ru", "1 * * * *", "Каждый час в 1 минуту"),
        ("ru", "21 * * * *", "Каждый час в 21 минуту"),
        ("ru", "22 * * * *", "Каждый час в 22 минуты"),
        ("ru", "11 * * * *", "Каждый час в 11 минут"),
        ("de", "17 * * * *", "Stündlich, 17 Minuten nach der vollen Stunde"),
        ("de", "1 * * * *", "Stündlich, 1 Minute nach der vollen Stunde"),
        # Every other shape is cron-descriptor's.
        ("ru", "*/5 * * * *", "Каждые 5 минут"),
        ("ru", "0 * * * *", "Каждый час"),
        ("de", "17 3 * * *", "Um 03:17"),
    ],
)
def test_a_cadence_is_said_as_a_native_would_say_it(language, expression, said):
    with translation.override(language):
        assert cadence.words(expression) == said
