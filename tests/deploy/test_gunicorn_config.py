"""deploy/gunicorn.conf.py as gunicorn reads it: the decisions, and the operator's variables."""

from __future__ import annotations

import os
import subprocess

from tests.deploy.servers import BASE_DIR, CONFIG, GUNICORN

OPERATOR_VARIABLES = (
    "GUNICORN_BIND",
    "WEB_CONCURRENCY",
    "GUNICORN_THREADS",
    "GUNICORN_TIMEOUT",
    "GUNICORN_GRACEFUL_TIMEOUT",
    "GUNICORN_ACCESS_LOG",
    "GUNICORN_LOG_LEVEL",
    "FORWARDED_ALLOW_IPS",
    "PORT",
)


def effective_config(**env: str) -> dict[str, str]:
    """gunicorn's --print-config under env (and none of this machine's gunicorn variables)."""
    clean = {k: v for k, v in os.environ.items() if k not in OPERATOR_VARIABLES}
    result = subprocess.run(
        [str(GUNICORN), "--print-config", "-c", str(CONFIG), "v10r.wsgi"],
        cwd=BASE_DIR,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    settings = {}
    for line in result.stdout.splitlines():
        name, separator, value = line.partition(" = ")
        if separator:
            settings[name.strip()] = value.strip()
    return settings


def test_the_defaults_are_threads_on_loopback_behind_one_trusted_proxy():
    config = effective_config()
    assert config["worker_class"] == "gthread"
    assert config["threads"] == "4"
    assert config["workers"] == str(len(os.sched_getaffinity(0)))
    assert config["bind"] == "['127.0.0.1:8000']"
    assert config["forwarded_allow_ips"] == "['127.0.0.1', '::1']"
    # Only the header nginx writes may make a request https.
    assert config["secure_scheme_headers"] == "{'X-FORWARDED-PROTO': 'https'}"
    assert config["forwarder_headers"] == "[]"
    # Outlasts nginx's upstream keepalive_timeout (60 s): nginx closes idle connections.
    assert int(config["keepalive"]) > 60
    # Not below what nginx lets through (its 8 KB header buffers).
    assert config["limit_request_line"] == config["limit_request_field_size"] == "8190"
    assert config["control_socket_disable"] == "True"
    # A restart lets a cron drain (CRON_DRAIN_SECONDS, 20 s) finish.
    assert int(config["graceful_timeout"]) > 20


def test_an_operator_sets_bind_workers_threads_and_timeouts_from_the_environment():
    config = effective_config(
        GUNICORN_BIND="unix:/run/v10r/gunicorn.sock,127.0.0.1:9000",
        WEB_CONCURRENCY="3",
        GUNICORN_THREADS="8",
        GUNICORN_TIMEOUT="45",
        GUNICORN_GRACEFUL_TIMEOUT="28",
        GUNICORN_ACCESS_LOG="-",
        FORWARDED_ALLOW_IPS="10.0.0.5",
    )
    assert config["bind"] == "['unix:/run/v10r/gunicorn.sock', '127.0.0.1:9000']"
    assert (config["workers"], config["threads"]) == ("3", "8")
    assert (config["timeout"], config["graceful_timeout"]) == ("45", "28")
    assert config["accesslog"] == "-"
    assert config["forwarded_allow_ips"] == "['10.0.0.5']"


def test_a_platform_port_does_not_open_the_app_on_every_interface():
    """gunicorn's own default binds 0.0.0.0:$PORT when PORT is set; ours stays on loopback."""
    assert effective_config(PORT="5000")["bind"] == "['127.0.0.1:8000']"


def test_a_bad_number_stops_gunicorn_with_a_sentence_naming_the_variable():
    clean = {k: v for k, v in os.environ.items() if k not in OPERATOR_VARIABLES}
    for name, raw, message in [
        ("GUNICORN_THREADS", "four", "GUNICORN_THREADS='four' is not a whole number."),
        ("WEB_CONCURRENCY", "0", "WEB_CONCURRENCY='0' must be at least 1."),
    ]:
        result = subprocess.run(
            [str(GUNICORN), "--print-config", "-c", str(CONFIG), "v10r.wsgi"],
            cwd=BASE_DIR,
            env=clean | {name: raw},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0
        assert message in result.stderr + result.stdout
