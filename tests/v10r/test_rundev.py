"""`make run` as a developer runs it: its ports are theirs to choose, a taken one is named in
one line, and the system checks' warnings are printed once, not once per process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import urllib.request

import pytest

from tests.helpers import BASE_DIR, database_url, poll, python

pytestmark = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def developer_env(**extra: str) -> dict[str, str]:
    """A developer's shell: no mail server, no channel list, no bot tokens."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EMAIL_", "DELIVERY_", "TELEGRAM_", "DISCORD_"))
        and k not in {"V10R_CHANNELS", "PORT", "SMTP_PORT"}
    }
    return env | {"DJANGO_DEBUG": "1", **extra}


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_make_run_serves_on_the_ports_given_and_prints_each_warning_once():
    port, smtp_port = free_port(), free_port()
    # -o: the virtualenv is there already; make must not reinstall it for this test.
    process = subprocess.Popen(
        ["make", "-o", ".venv/.installed", "run", f"PORT={port}", f"SMTP_PORT={smtp_port}"],
        cwd=BASE_DIR,
        env=developer_env(DATABASE_URL=database_url()),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    try:
        assert poll(lambda: answers(port), seconds=180, every=0.5), "".join(lines)
        # The drain logs its start after the checks it would have run: it has started.
        assert poll(lambda: any("drain_outbox " in line for line in lines), seconds=60)
        # The jobs' sweep runs beside them, every minute.
        assert poll(
            lambda: any("Sweeping the jobs every 60 s" in line for line in lines), seconds=60
        )
        with socket.create_connection(("127.0.0.1", smtp_port), timeout=5) as smtp:
            assert smtp.recv(100).startswith(b"220")
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
        reader.join(timeout=10)
    output = "".join(lines)
    for channel in ("telegram", "discord"):
        warning = f"(transports.W001) The {channel} channel is configured"
        assert output.count(warning) == 1, output


@pytest.mark.parametrize(
    ("option", "variable", "what"),
    [("--port", "PORT", "the web server"), ("--smtp-port", "SMTP_PORT", "the SMTP sink")],
)
def test_a_taken_port_stops_rundev_with_one_line_naming_it(option, variable, what):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        others = {"--port": free_port(), "--smtp-port": free_port()} | {option: port}
        result = python(
            "manage.py",
            "rundev",
            *(f"{name}={value}" for name, value in others.items()),
            # No bot channels, so no warnings: the refusal is all that is printed.
            env=developer_env(DATABASE_URL=database_url(), V10R_CHANNELS="email,webhook,demo"),
            seconds=60,
        )
    assert result.returncode != 0
    [line] = result.stderr.splitlines()
    prefix = (
        f"CommandError: Port {port} ({what}) is taken by another process; stop it, or "
        f"choose another port: make run {variable}="
    )
    assert line.startswith(prefix), line
    hinted = int(line.removeprefix(prefix))
    # The hint is a port that was free, and not the other server's.
    assert hinted > port and hinted not in others.values()


@contextlib.contextmanager
def taken_run(length: int):
    """Hold length consecutive ports on 127.0.0.1, listening; yield the first."""
    while True:
        held = []
        try:
            first = socket.socket()
            first.bind(("127.0.0.1", 0))
            held.append(first)
            start = first.getsockname()[1]
            for offset in range(1, length):
                more = socket.socket()
                held.append(more)
                more.bind(("127.0.0.1", start + offset))
        except OSError:
            for sock in held:
                sock.close()
            continue
        for sock in held:
            sock.listen()
        try:
            yield start
        finally:
            for sock in held:
                sock.close()
        return


def test_the_hint_for_a_taken_port_skips_the_taken_ports_after_it():
    from v10r.management.commands import rundev

    with taken_run(3) as port:
        hinted = rundev.free_port_after(port)
        assert hinted is not None and hinted >= port + 3
        assert rundev.is_free(hinted)
        assert not rundev.is_free(port + 1)
        assert rundev.free_port_after(port, avoid=frozenset({hinted})) != hinted


def test_a_taken_port_with_a_taken_neighbour_is_never_hinted_at():
    from django.core.management.base import CommandError

    from v10r.management.commands import rundev

    with taken_run(2) as port, pytest.raises(CommandError) as refused:
        rundev.refuse_taken(port=port, what="the web server", variable="PORT")
    assert f"make run PORT={port + 1}" not in str(refused.value)
    assert f"Port {port} (the web server) is taken" in str(refused.value)
