from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time

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


def refuse_taken(*, port: int, what: str, variable: str) -> None:
    """Raise CommandError, naming the port and how to pick another, when port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the servers bind: a port left in TIME_WAIT by the last run is free to them.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            raise CommandError(
                f"Port {port} ({what}) is taken by another process; stop it, or choose "
                f"another port: make run {variable}={port + 1}"
            ) from None


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
        refuse_taken(port=port, what="the web server", variable="PORT")
        if sink:
            if smtp_port == port:
                raise CommandError(
                    f"The web server and the SMTP sink cannot share port {port}; choose "
                    f"another: make run SMTP_PORT={port + 1}"
                )
            refuse_taken(port=smtp_port, what="the SMTP sink", variable="SMTP_PORT")
        call_command("ensure_dev_superuser")
        call_command("ensure_dev_users")
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
