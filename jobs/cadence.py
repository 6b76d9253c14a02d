"""A job's cadence: a cron expression, read by croniter, told in words by cron-descriptor.

Slots are computed in UTC (settings.TIME_ZONE) from the database's clock, so an expression
means the same instant on every host, whatever its local clock or zone says.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cron_descriptor import ExpressionDescriptor, Options
from croniter import CroniterError, croniter
from django.utils import translation
from django.utils.translation import ngettext

# cron-descriptor's own catalogues, by the site's language codes.
LOCALES = {"en": "en_US", "ru": "ru_RU", "de": "de_DE"}
_TICK = timedelta(microseconds=1)


def problem(expression: object) -> str | None:
    """Why expression is no cadence, or None when it is one."""
    if not isinstance(expression, str) or len(expression.split()) != 5:
        return (
            f"{expression!r} is not a cron expression of five fields "
            "(minute hour day-of-month month day-of-week)"
        )
    try:
        # An expression can parse and still never come due (the 31st of February).
        following(expression, now=datetime(2000, 1, 1, tzinfo=UTC))
    except CroniterError as error:
        return f"{expression!r} is not a usable cron expression: {error}"
    return None


def previous(expression: str, *, now: datetime) -> datetime:
    """The latest slot at or before now."""
    # get_prev is strictly before its start: a slot that is exactly now counts as come.
    return croniter(expression, now.astimezone(UTC) + _TICK).get_prev(datetime)


def following(expression: str, *, now: datetime) -> datetime:
    """The first slot after now."""
    return croniter(expression, now.astimezone(UTC)).get_next(datetime)


def _hourly_at(expression: str) -> str | None:
    """Words for "M * * * *" (M past every hour), which cron-descriptor's Russian and German
    get wrong: "В 17 минут" reads as a duration ("in 17 minutes"), "Bei Minute 17" as no
    German sentence. Russian needs the minute's plural form ("в 21 минуту", "в 17 минут")."""
    minute, *rest = expression.split()
    if rest != ["*"] * 4 or not minute.isdigit() or not 0 < int(minute) < 60:
        return None
    count = int(minute)
    return ngettext(
        "At %(minute)d minute past the hour", "At %(minute)d minutes past the hour", count
    ) % {"minute": count}


def words(expression: str) -> str:
    """The cadence in the active language's words ("Every 5 minutes")."""
    if isinstance(expression, str) and (hourly := _hourly_at(expression)):
        return hourly
    options = Options()
    options.use_24hour_time_format = True
    options.locale_code = LOCALES.get(translation.get_language() or "en", "en_US")
    try:
        return ExpressionDescriptor(expression, options).get_description()
    except Exception:  # noqa: BLE001 - a bad expression is the checks' to report, not a page's
        return expression
