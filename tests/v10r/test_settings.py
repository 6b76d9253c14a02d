"""Settings read from the environment: production passes the deploy checks, bad values are
named clearly. Each case runs manage.py in a fresh process, as an operator would."""

from __future__ import annotations

import os
import re
import runpy
import socket
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from notifications.checks import lease_problem
from tests.helpers import python
from v10r.environment import SettingError

BASE_DIR = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DJANGO_SECRET_KEY": "a-long-random-production-secret-8f3e1c9b7a6d5e4f3a2b1c0d9e8f7a6b5c4d",
    "DJANGO_ALLOWED_HOSTS": "v10r.example",
    "DATABASE_URL": "postgres://v10r:secret@db.internal:5432/v10r",
    # No bot tokens here, so no bot channels: a configured one without its token warns.
    "V10R_CHANNELS": "email,webhook,demo",
    # The emails' links (the reset, one-click unsubscribe) point here.
    "SITE_ORIGIN": "https://v10r.example",
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
    ("origin", "check"), [("", "notifications.W002"), ("http://v10r.example", "notifications.W003")]
)
def test_the_deploy_checks_want_an_https_origin_for_the_emails_links(origin, check):
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", env={**PRODUCTION, "SITE_ORIGIN": origin}
    )
    assert result.returncode != 0
    assert check in result.stderr


def read_settings(monkeypatch, **env: str) -> dict:
    """Run v10r/settings.py afresh under PRODUCTION and env; return its names."""
    for name in list(os.environ):
        if name.startswith(("DJANGO_", "V10R_", "DELIVERY_", "EMAIL_", "OUTBOX_", "CRON_")):
            monkeypatch.delenv(name)
    for name in ("DATABASE_URL", "METRICS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**PRODUCTION, **env}.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(BASE_DIR / "v10r" / "settings.py"))


# Every bound of every reader: (variable, its lowest value, one just below, its highest, one
# just above). The lowest and the highest are read as given; one just outside is refused, in
# words that name the bound.
BOUNDS = [
    ("DELIVERY_BATCH_SIZE", "1", "0", "10000", "10001"),
    ("DELIVERY_CONCURRENCY", "1", "0", "64", "65"),
    ("DELIVERY_LEASE_SECONDS", "1", "0.999", "86400", "86400.5"),
    ("DELIVERY_INTERVAL_SECONDS", "0.1", "0.09", "86400", "86401"),
    ("DELIVERY_MAX_ATTEMPTS", "1", "0", "20", "21"),
    ("DELIVERY_HTTP_CONNECT_TIMEOUT", "0.1", "0.09", "60", "60.1"),
    ("DELIVERY_HTTP_TOTAL_TIMEOUT", "0.1", "0.09", "300", "300.1"),
    ("EMAIL_PORT", "1", "0", "65535", "65536"),
    ("EMAIL_TIMEOUT", "0.1", "0.09", "300", "301"),
    ("CRON_DRAIN_SECONDS", "1", "0.5", "50", "50.1"),
    ("DJANGO_HSTS_SECONDS", "0", "-1", "63072000", "63072001"),
    ("V10R_TRUSTED_PROXIES", "0", "-1", "10", "11"),
    ("INBOX_STATE_POLLS_PER_MINUTE", "40", "39", "10000", "10001"),
    ("OUTBOX_KEEP_SENT_DAYS", "1", "0", "36500", "36501"),
    ("OUTBOX_KEEP_FINISHED_DAYS", "1", "0", "36500", "36501"),
    ("OUTBOX_PRUNE_BATCH", "1", "0", "100000", "100001"),
]
# Where a refusal says why its bound is there, how that begins.
REASONS = {
    ("DELIVERY_BATCH_SIZE", "10000"): "(drain_outbox's",
    ("DELIVERY_CONCURRENCY", "64"): "(drain_outbox's limit)",
    ("CRON_DRAIN_SECONDS", "50"): "(a /cron/drain request",
}
# What a value at a bound needs set beside it: the connect timeout is at most the total one,
# and sent deliveries are kept no longer than failed ones.
COMPANIONS = {
    ("DELIVERY_HTTP_CONNECT_TIMEOUT", "60"): {"DELIVERY_HTTP_TOTAL_TIMEOUT": "60"},
    ("DELIVERY_HTTP_TOTAL_TIMEOUT", "0.1"): {"DELIVERY_HTTP_CONNECT_TIMEOUT": "0.1"},
    ("OUTBOX_KEEP_SENT_DAYS", "36500"): {"OUTBOX_KEEP_FINISHED_DAYS": "36500"},
    ("OUTBOX_KEEP_FINISHED_DAYS", "1"): {"OUTBOX_KEEP_SENT_DAYS": "1"},
}
# (variable, value just inside, value just outside, the words the refusal must contain, what
# else the value needs set).
EDGES = [
    (
        variable,
        inside,
        outside,
        " ".join(filter(None, [f"must be at {side} {inside}", REASONS.get((variable, inside))])),
        COMPANIONS.get((variable, inside), {}),
    )
    for variable, lowest, below, highest, above in BOUNDS
    for side, inside, outside in [("least", lowest, below), ("most", highest, above)]
] + [
    ("METRICS_TOKEN", "m" * 32, "m" * 31, "METRICS_TOKEN has 31 characters; use at least 32", {}),
    ("CRON_SECRET", "c" * 32, "c" * 31, "CRON_SECRET has 31 characters; use at least 32", {}),
]


def read_value(read: dict, variable: str):
    if variable.startswith("EMAIL_"):
        return read["MAILERS"]["default"]["OPTIONS"][variable.removeprefix("EMAIL_").lower()]
    return read[variable.replace("DJANGO_HSTS_SECONDS", "SECURE_HSTS_SECONDS")]


@pytest.mark.parametrize(("variable", "inside", "outside", "words", "extra"), EDGES)
def test_each_bound_takes_the_value_just_inside_and_refuses_the_one_just_outside(
    monkeypatch, variable, inside, outside, words, extra
):
    value = read_value(read_settings(monkeypatch, **extra, **{variable: inside}), variable)
    assert value == type(value)(inside)
    with pytest.raises(SettingError) as refused:
        read_settings(monkeypatch, **extra, **{variable: outside})
    message = str(refused.value)
    assert message.startswith(variable)
    assert words in message
    assert "\n" not in message


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "ten", "1_0x"])
@pytest.mark.parametrize(
    "variable", ["DELIVERY_LEASE_SECONDS", "DELIVERY_INTERVAL_SECONDS", "CRON_DRAIN_SECONDS"]
)
def test_a_number_that_is_not_finite_or_not_a_number_is_refused(monkeypatch, variable, value):
    with pytest.raises(SettingError, match=f"^{variable}='{value}' is not a"):
        read_settings(monkeypatch, **{variable: value})


def test_the_drain_settings_bounds_are_drain_outboxs_own():
    from notifications.management.commands.drain_outbox import Command

    parser = Command().create_parser("manage.py", "drain_outbox")
    for option, variable in [
        ("--batch-size", "DELIVERY_BATCH_SIZE"),
        ("--concurrency", "DELIVERY_CONCURRENCY"),
        ("--lease", "DELIVERY_LEASE_SECONDS"),
        ("--interval", "DELIVERY_INTERVAL_SECONDS"),
    ]:
        edges = [(inside, outside) for name, inside, outside, *_ in EDGES if name == variable]
        for inside, outside in edges:
            parser.parse_args([option, inside])
            with pytest.raises(CommandError):
                parser.parse_args([option, outside])


ONE_LINE_CASES = [
    ({"DJANGO_ALLOWED_HOSTS": "v10r.example"}, "DJANGO_SECRET_KEY is required"),
    ({**PRODUCTION, "DJANGO_DEBUG": "maybe"}, "DJANGO_DEBUG='maybe' is not a boolean"),
    ({**PRODUCTION, "DJANGO_HSTS_SECONDS": "a year"}, "DJANGO_HSTS_SECONDS='a year' is not a"),
    ({**PRODUCTION, "DATABASE_URL": "sqlite:///db.sqlite3"}, "DATABASE_URL must point at"),
    ({**PRODUCTION, "DATABASE_URL": "garbage"}, "DATABASE_URL is not a database URL; use"),
    ({**PRODUCTION, "V10R_PLATFORM": "heroku"}, "V10R_PLATFORM='heroku' is not one of"),
    ({**PRODUCTION, "V10R_CHANNELS": "email,sms,demo"}, "V10R_CHANNELS names unknown sms"),
    ({**PRODUCTION, "V10R_LOG_LEVEL": "loud"}, "V10R_LOG_LEVEL='loud' is not a log level"),
    ({**PRODUCTION, "DELIVERY_LEASE_SECONDS": "inf"}, "DELIVERY_LEASE_SECONDS='inf' is not a"),
    ({**PRODUCTION, "DELIVERY_CONCURRENCY": "0"}, "DELIVERY_CONCURRENCY='0' must be at least 1"),
    (
        {**PRODUCTION, "DELIVERY_CONCURRENCY": "100000"},
        "DELIVERY_CONCURRENCY='100000' must be at most 64",
    ),
    ({**PRODUCTION, "EMAIL_PORT": "99999"}, "EMAIL_PORT='99999' must be at most 65535"),
    ({**PRODUCTION, "CRON_DRAIN_SECONDS": "90"}, "CRON_DRAIN_SECONDS='90' must be at most 50"),
    (
        {**PRODUCTION, "DELIVERY_MAX_ATTEMPTS": "100000"},
        "DELIVERY_MAX_ATTEMPTS='100000' must be at most 20",
    ),
    (
        {**PRODUCTION, "METRICS_TOKEN": "m" * 31},
        "METRICS_TOKEN has 31 characters; use at least 32, so it cannot be guessed. "
        'Generate one with: python -c "import secrets; print(secrets.token_urlsafe(32))"',
    ),
    ({**PRODUCTION, "TELEGRAM_API_BASE_URL": "api.telegram.org"}, "is not an http(s) URL"),
    ({**PRODUCTION, "METRICS_ALLOWED_NETWORKS": "10.0.0.0/33"}, "is not a network; use CIDR"),
]


def assert_one_line(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(("env", "message"), ONE_LINE_CASES)
def test_a_bad_environment_stops_manage_py_with_one_line_naming_the_variable(env, message):
    assert_one_line(manage("check", env=env), message)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**PRODUCTION, "DELIVERY_LEASE_SECONDS": "inf"}, "DELIVERY_LEASE_SECONDS='inf' is not"),
        ({**PRODUCTION, "DATABASE_URL": "garbage"}, "DATABASE_URL is not a database URL"),
    ],
)
def test_a_bad_environment_stops_drain_outbox_with_one_line(env, message):
    assert_one_line(manage("drain_outbox", "--once", env=env), message)


@pytest.mark.parametrize(
    ("env", "message"),
    [case for case in ONE_LINE_CASES if set(case[0]) & {"DJANGO_DEBUG", "DATABASE_URL"}]
    + [case for case in ONE_LINE_CASES if "DELIVERY_LEASE_SECONDS" in case[0]],
)
def test_a_bad_environment_stops_gunicorn_with_one_line_before_it_listens(env, message):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "V10R_"))}
    clean.pop("DATABASE_URL", None)
    result = subprocess.run(
        [str(BASE_DIR / ".venv" / "bin" / "gunicorn"), "-c", "deploy/gunicorn.conf.py"]
        + ["v10r.wsgi"],
        cwd=BASE_DIR,
        env={**clean, **env, "GUNICORN_BIND": f"127.0.0.1:{free_port()}", "WEB_CONCURRENCY": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_one_line(result, message)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_cron_secret_of_32_characters_is_accepted():
    result = manage("check", env={**PRODUCTION, "CRON_SECRET": "x" * 32})
    assert result.returncode == 0, result.stderr


def test_debug_needs_no_other_variable():
    result = manage("check", env={"DJANGO_DEBUG": "1"})
    assert result.returncode == 0, result.stderr


def test_a_lease_too_short_for_a_batch_names_the_shortest_lease_that_would_do():
    result = manage("check", env={**PRODUCTION, "DELIVERY_LEASE_SECONDS": "10"})
    assert result.returncode != 0
    shortest = re.search(r"Set DELIVERY_LEASE_SECONDS=(\d+) or more", result.stderr)
    assert shortest, result.stderr
    enough = {**PRODUCTION, "DELIVERY_LEASE_SECONDS": shortest[1]}
    assert manage("check", env=enough).returncode == 0
    short = {**PRODUCTION, "DELIVERY_LEASE_SECONDS": str(int(shortest[1]) - 1)}
    assert "notifications.E001" in manage("check", env=short).stderr


def test_drain_outbox_refuses_a_short_lease_naming_the_option_that_fixes_it():
    with pytest.raises(CommandError) as refused:
        call_command("drain_outbox", "--once", "--lease=10", "--batch-size=100", skip_checks=True)
    shortest = re.search(
        r"Use --lease (\d+) or more, or a smaller --batch-size", str(refused.value)
    )
    assert shortest, refused.value
    assert (
        lease_problem(lease=timedelta(seconds=int(shortest[1])), batch_size=100, concurrency=16)
        is None
    )
    assert lease_problem(
        lease=timedelta(seconds=int(shortest[1]) - 1), batch_size=100, concurrency=16
    )


def test_a_plain_http_trial_turns_off_the_redirect_the_secure_cookies_and_hsts(monkeypatch):
    production = read_settings(monkeypatch)
    assert production["SECURE_SSL_REDIRECT"] is True
    assert production["SESSION_COOKIE_SECURE"] is production["CSRF_COOKIE_SECURE"] is True
    assert production["SECURE_HSTS_SECONDS"] == 31_536_000
    trial = read_settings(
        monkeypatch,
        DJANGO_SECURE_SSL_REDIRECT="0",
        DJANGO_SECURE_COOKIES="0",
        DJANGO_HSTS_SECONDS="0",
    )
    assert trial["SECURE_SSL_REDIRECT"] is False
    assert trial["SESSION_COOKIE_SECURE"] is trial["CSRF_COOKIE_SECURE"] is False
    assert trial["SECURE_HSTS_SECONDS"] == 0


# gunicorn's own variables' maxima: the value one above each is refused.
@pytest.mark.parametrize(
    ("variable", "highest"),
    {
        "WEB_CONCURRENCY": 256,
        "GUNICORN_THREADS": 64,
        "GUNICORN_TIMEOUT": 3600,
        "GUNICORN_GRACEFUL_TIMEOUT": 3600,
    }.items(),
)
def test_gunicorns_own_variables_have_a_maximum_too(variable, highest):
    def print_config(value: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BASE_DIR / ".venv" / "bin" / "gunicorn"), "--print-config", "-c"]
            + ["deploy/gunicorn.conf.py", "v10r.wsgi"],
            cwd=BASE_DIR,
            env={**os.environ, variable: value},
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert print_config(str(highest)).returncode == 0
    refused = print_config(str(highest + 1))
    assert refused.returncode != 0
    assert refused.stderr.splitlines() == [f"{variable}='{highest + 1}' must be at most {highest}."]


def test_bare_gunicorn_without_the_config_stops_on_a_bad_setting_without_a_traceback():
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "V10R_"))}
    clean.pop("DATABASE_URL", None)
    result = subprocess.run(
        [str(BASE_DIR / ".venv" / "bin" / "gunicorn"), "--no-control-socket", "--bind"]
        + [f"127.0.0.1:{free_port()}", "v10r.wsgi"],
        cwd=BASE_DIR,
        env={**clean, **PRODUCTION, "DELIVERY_CONCURRENCY": "100000"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    # gunicorn's own lines stay; the settings' line is there once, and no traceback.
    assert result.returncode != 0
    assert result.stderr.count("DELIVERY_CONCURRENCY='100000' must be at most 64") == 1
    assert "Traceback" not in result.stderr
    assert "App failed to load" in result.stderr


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("", ""),
        ("https://v10r.example/", "https://v10r.example"),
        ("http://h:8080", "http://h:8080"),
    ],
)
def test_site_origin_is_an_origin_without_its_trailing_slash(monkeypatch, value, read):
    assert read_settings(monkeypatch, SITE_ORIGIN=value)["SITE_ORIGIN"] == read


@pytest.mark.parametrize(
    "value",
    [
        "v10r.example",
        "ftp://v10r.example",
        "https://v10r.example/app",
        "https://u@h",
        "https://h:99999",
    ],
)
def test_site_origin_with_a_path_or_another_scheme_is_refused(monkeypatch, value):
    with pytest.raises(SettingError, match=r"^SITE_ORIGIN='.*' is not an origin; use https://host"):
        read_settings(monkeypatch, SITE_ORIGIN=value)


def test_a_provider_rate_is_zero_or_at_least_one_send_in_a_thousand_seconds(monkeypatch):
    assert (
        read_settings(monkeypatch, DELIVERY_RATE_TELEGRAM="0.001")["DELIVERY_PROVIDER_RATES"][
            "telegram"
        ]
        == 0.001
    )
    assert (
        read_settings(monkeypatch, DELIVERY_RATE_TELEGRAM="0")["DELIVERY_PROVIDER_RATES"][
            "telegram"
        ]
        == 0
    )
    with pytest.raises(SettingError, match=r"^DELIVERY_RATE_TELEGRAM=1e-09 is slower than one"):
        read_settings(monkeypatch, DELIVERY_RATE_TELEGRAM="1e-9")


def test_the_suite_hashes_passwords_quickly_and_the_site_does_not(db, django_user_model):
    # tests/conftest.py's quick_hashes: MD5 for every test that does not ask for the real one.
    user = django_user_model.objects.create_user("quick", password="a long enough secret")
    assert user.password.startswith("md5$")


@pytest.mark.real_password_hasher
def test_a_test_that_asks_for_the_real_hasher_gets_the_sites_own(db, django_user_model):
    user = django_user_model.objects.create_user("real", password="a long enough secret")
    assert user.password.startswith("pbkdf2_sha256$")
    assert user.check_password("a long enough secret")


@pytest.mark.parametrize(
    ("value", "read"), [(None, (443,)), ("443", (443,)), (" 443, 8443 ,443", (443, 8443))]
)
def test_push_endpoint_ports_are_a_list_of_ports(monkeypatch, value, read):
    extra = {} if value is None else {"WEBPUSH_ENDPOINT_PORTS": value}
    assert read_settings(monkeypatch, **extra)["WEBPUSH_ENDPOINT_PORTS"] == read


@pytest.mark.parametrize("value", ["0", "65536", "https", "443;8443", "-1"])
def test_a_push_endpoint_port_that_is_no_port_is_refused(monkeypatch, value):
    with pytest.raises(SettingError) as refused:
        read_settings(monkeypatch, WEBPUSH_ENDPOINT_PORTS=value)
    assert str(refused.value).startswith(f"WEBPUSH_ENDPOINT_PORTS={value!r}: ")
    assert "is not a port from 1 to 65535" in str(refused.value)
