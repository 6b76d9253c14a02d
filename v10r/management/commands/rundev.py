from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from notifications.management.arguments import bounded
from v10r import devmail

HOST = "127.0.0.1"
# The servers' ports: (flag, default, what listens there).
PORTS = (
    ("--port", 8000, "The web server's port on 127.0.0.1"),
    ("--smtp-port", 1025, "The SMTP sink's port on 127.0.0.1, when EMAIL_HOST is unset"),
)


# How far past a taken port the hint looks for a free one.
HINT_SPAN = 100


def is_free(port: int) -> bool:
    """Whether a server could bind port on HOST now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the servers bind: a port left in TIME_WAIT by the last run is free to them.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as error:
            # Taken, or below 1024 for a user who may not bind there: not free either way.
            if error.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            return False
    return True


def free_port_after(port: int, *, avoid: frozenset[int] = frozenset()) -> int | None:
    """The first port after port that is free now and not in avoid (the other server's),
    within HINT_SPAN; None when there is none."""
    for candidate in range(port + 1, min(port + HINT_SPAN, 65_535) + 1):
        if candidate not in avoid and is_free(candidate):
            return candidate
    return None


def _another(*, port: int, variable: str, avoid: frozenset[int]) -> str:
    free = free_port_after(port, avoid=avoid)
    if free is None:
        return f"choose another port: make run {variable}=<port>"
    return f"choose another port: make run {variable}={free}"


def refuse_taken(*, port: int, what: str, variable: str, avoid: frozenset[int] = frozenset()):
    """Raise CommandError when port is taken, naming it and a port that is free (none of
    avoid, the ports the other servers will take)."""
    if is_free(port):
        return
    raise CommandError(
        f"Port {port} ({what}) is taken by another process; stop it, or "
        + _another(port=port, variable=variable, avoid=avoid | {port})
    )


class Command(BaseCommand):
    help = (
        "Development: the web server, the drain loop, the jobs' sweep and a local SMTP sink "
        "that prints every email, in one foreground command. Ctrl-C stops them all. The "
        "system checks run once, here, not again in each process."
    )

    def add_arguments(self, parser):
        for flag, default, text in PORTS:
            parser.add_argument(
                flag,
                type=bounded(int, low=1, high=65_535),
                default=default,
                help=f"{text} (default %(default)s).",
            )

    def handle(self, *args, port, smtp_port, **options):
        if not settings.DEBUG:
            raise CommandError("rundev is for development; run it with DJANGO_DEBUG=1.")
        sink = "EMAIL_HOST" not in os.environ
        sink_port = frozenset({smtp_port}) if sink else frozenset()
        refuse_taken(port=port, what="the web server", variable="PORT", avoid=sink_port)
        if sink:
            if smtp_port == port:
                raise CommandError(
                    f"The web server and the SMTP sink cannot share port {port}; "
                    + _another(port=port, variable="SMTP_PORT", avoid=frozenset({port}))
                )
            refuse_taken(
                port=smtp_port, what="the SMTP sink", variable="SMTP_PORT", avoid=frozenset({port})
            )
        call_command("ensure_dev_superuser")
        call_command("ensure_dev_users")
        if apps.is_installed("showcases"):
            # The showcase's sample rows, for the admin to show something (V10R_SHOWCASES).
            call_command("seed_demo")

        env = os.environ.copy()
        if not settings.SITE_ORIGIN:
            # The emails' links (a password reset, an unsubscribe link) point at this server.
            env["SITE_ORIGIN"] = f"http://{HOST}:{port}"
        # This command ran the checks before it started: the children need not print every
        # warning again.
        commands = {
            "web": [
                sys.executable,
                "manage.py",
                "runserver",
                "--skip-checks",
                f"{HOST}:{port}",
            ],
            "drain": [sys.executable, "manage.py", "drain_outbox", "--skip-checks"],
            # The jobs' sweep every minute, as the Procfile's scheduler runs it.
            "jobs": [
                sys.executable,
                "manage.py",
                "run_jobs",
                "--every",
                "60",
                "--skip-checks",
            ],
        }
        if sink:
            # Nobody configured a mail server: catch mail locally and print it, so the
            # queue's email deliveries really happen.
            env |= {"EMAIL_HOST": HOST, "EMAIL_PORT": str(smtp_port)}
            commands["smtp"] = devmail.sink_command(host=HOST, port=smtp_port)
            self.stdout.write(f"Email goes to a local sink on port {smtp_port}, printed here.")

        children = {
            name: subprocess.Popen(command, env=env, cwd=settings.BASE_DIR)
            for name, command in commands.items()
        }
        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        code = 0
        while not stopping:
            exited = {n: c.poll() for n, c in children.items() if c.poll() is not None}
            if exited:
                name, code = next(iter(exited.items()))
                self.stderr.write(f"{name} exited with code {code}; stopping the others.")
                break
            time.sleep(0.2)
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        if code:
            raise CommandError(f"a process exited with code {code}")
