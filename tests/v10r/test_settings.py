"""Settings read from the environment: production passes the deploy checks, bad values are
named clearly. Each case runs manage.py in a fresh process, as an operator would."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import python

BASE_DIR = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DJANGO_SECRET_KEY": "a-long-random-production-secret-8f3e1c9b7a6d5e4f3a2b1c0d9e8f7a6b5c4d",
    "DJANGO_ALLOWED_HOSTS": "v10r.example",
    "DATABASE_URL": "postgres://v10r:secret@db.internal:5432/v10r",
    # No bot tokens here, so no bot channels: a configured one without its token warns.
    "V10R_CHANNELS": "email,webhook,demo",
}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "V10R_"))}
    clean.pop("DATABASE_URL", None)
    return python("manage.py", *args, env={**clean, **env}, seconds=60)


def test_production_settings_pass_the_deploy_checks_at_warning_level():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_the_deploy_checks_bite_when_a_production_setting_is_weakened():
    weakened = {**PRODUCTION, "DJANGO_HSTS_SECONDS": "0"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=weakened)
    assert result.returncode != 0
    assert "security.W004" in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_ALLOWED_HOSTS": "v10r.example"}, "DJANGO_SECRET_KEY is required"),
        ({**PRODUCTION, "DJANGO_DEBUG": "maybe"}, "DJANGO_DEBUG='maybe' is not a boolean"),
        (
            {**PRODUCTION, "DJANGO_HSTS_SECONDS": "a year"},
            "DJANGO_HSTS_SECONDS='a year' is not a whole",
        ),
        ({**PRODUCTION, "DJANGO_HSTS_SECONDS": "-1"}, "must be at least 0"),
        (
            {**PRODUCTION, "DATABASE_URL": "sqlite:///db.sqlite3"},
            "DATABASE_URL must point at PostgreSQL",
        ),
        ({**PRODUCTION, "V10R_PLATFORM": "heroku"}, "V10R_PLATFORM='heroku' is not one of"),
        ({**PRODUCTION, "CRON_SECRET": "x" * 31}, "CRON_SECRET has 31 characters; use at least 32"),
        (
            {**PRODUCTION, "CRON_DRAIN_SECONDS": "0.5"},
            "CRON_DRAIN_SECONDS='0.5' must be at least 1",
        ),
        (
            {**PRODUCTION, "V10R_TRUSTED_PROXIES": "one"},
            "V10R_TRUSTED_PROXIES='one' is not a whole",
        ),
        (
            {**PRODUCTION, "V10R_TRUSTED_PROXIES": "-1"},
            "V10R_TRUSTED_PROXIES='-1' must be at least 0",
        ),
        (
            {**PRODUCTION, "OUTBOX_PRUNE_BATCH": "200000"},
            "OUTBOX_PRUNE_BATCH='200000' must be at most 100000",
        ),
        (
            {**PRODUCTION, "OUTBOX_KEEP_SENT_DAYS": "1000000000"},
            "OUTBOX_KEEP_SENT_DAYS='1000000000' must be at most 36500",
        ),
        (
            {**PRODUCTION, "OUTBOX_KEEP_FINISHED_DAYS": "40000"},
            "OUTBOX_KEEP_FINISHED_DAYS='40000' must be at most 36500",
        ),
    ],
)
def test_a_bad_environment_stops_start_up_with_a_message_naming_the_variable(env, message):
    result = manage("check", env=env)
    assert result.returncode != 0
    assert message in result.stderr


def test_a_cron_secret_of_32_characters_is_accepted():
    result = manage("check", env={**PRODUCTION, "CRON_SECRET": "x" * 32})
    assert result.returncode == 0, result.stderr


def test_debug_needs_no_other_variable():
    result = manage("check", env={"DJANGO_DEBUG": "1"})
    assert result.returncode == 0, result.stderr
