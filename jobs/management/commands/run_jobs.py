from __future__ import annotations

import signal
import threading
import time

from django.core.management.base import BaseCommand
from django.db import DatabaseError, connection

from jobs import cadence, registry, runner
from jobs.management.commands.run_job import exit_on_sigterm, refuse_unless_succeeded, write
from jobs.models import Trigger
from notifications.management.arguments import bounded


class Command(BaseCommand):
    help = (
        "--due: run every job whose cadence came due since its last run, once each (a job "
        "missed while the host was down runs once, not once per missed slot), and exit; "
        "schedule it every minute (deploy/systemd/v10r-jobs.timer). --every SECONDS: keep "
        "sweeping at that interval until SIGTERM, for a host with no timer (the Procfile's "
        "scheduler, make run). --list: the jobs and their cadences."
    )

    def add_arguments(self, parser):
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--due", action="store_true", help="Run the jobs that are due.")
        what.add_argument(
            "--every",
            type=bounded(float, low=1, high=3600),
            help="Sweep every this many seconds until stopped.",
        )
        what.add_argument("--list", action="store_true", help="List the jobs; run none.")

    def handle(self, *args, due, every, list, **options):
        if list:
            for job in registry.jobs():
                self.stdout.write(
                    f"{job.slug}\t{job.cadence}\t{cadence.words(job.cadence)}\t{job.description}"
                )
            return
        if every:
            self.loop(every)
            return
        with exit_on_sigterm():
            outcomes = runner.sweep(trigger=Trigger.SCHEDULER)
        for outcome in outcomes:
            write(self, outcome)
        refuse_unless_succeeded(outcomes)

    def loop(self, every: float) -> None:
        stopping = threading.Event()

        def stop(signum, frame):
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(
            f"Sweeping the jobs every {every:g} s until SIGTERM or Ctrl-C; either lets the sweep"
            " under way finish, then exits."
        )
        while not stopping.is_set():
            began = time.monotonic()
            try:
                for outcome in runner.sweep(trigger=Trigger.SCHEDULER):
                    write(self, outcome)
            except DatabaseError as error:
                # The database away for a moment: say so and try at the next interval.
                self.stderr.write(f"The sweep failed: {error}")
                connection.close()
            stopping.wait(max(0.0, every - (time.monotonic() - began)))
        self.stdout.write("Stopped.")
