from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

DEV_SMTP_PORT = 1025


class Command(BaseCommand):
    help = (
        "Development: the web server, the drain loop and a local SMTP sink that prints every "
        "email, in one foreground command. Ctrl-C stops all three."
    )

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")

    def handle(self, *args, addrport, **options):
        if not settings.DEBUG:
            raise CommandError("rundev is for development; run it with DJANGO_DEBUG=1.")
        call_command("ensure_dev_superuser")
        call_command("seed_demo")

        env = os.environ.copy()
        commands = {
            "web": [sys.executable, "manage.py", "runserver", addrport],
            "drain": [sys.executable, "manage.py", "drain_outbox"],
        }
        if "EMAIL_HOST" not in os.environ:
            # Nobody configured a mail server: catch mail locally and print it, so the
            # queue's email deliveries really happen.
            env |= {"EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(DEV_SMTP_PORT)}
            commands["smtp"] = [
                sys.executable,
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                f"127.0.0.1:{DEV_SMTP_PORT}",
            ]
            self.stdout.write(f"Email goes to a local sink on port {DEV_SMTP_PORT}, printed here.")

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
