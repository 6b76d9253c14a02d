from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, close_old_connections, connection

from notifications import drain, heartbeat
from notifications.checks import lease_problem
from v10r import housekeeping

logger = logging.getLogger("notifications.drain_outbox")

BEAT_AT_MOST_EVERY = 1.0  # seconds, while batches come back full


def _bounded(kind, *, low, high=None):
    def parse(text: str):
        noun = "a whole number" if kind is int else "a number"
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not value >= low or (high is not None and value > high):
            limit = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{text} is out of range; use {noun} {limit}")
        return value

    return parse


class Command(BaseCommand):
    help = (
        "Deliver due notifications from the outbox: a resident loop (one tick every "
        "--interval seconds, again at once while batches come back full), or one batch with "
        "--once for cron. SIGTERM or SIGINT finish the current batch, then exit 0."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Drain one batch and exit.")
        parser.add_argument(
            "--batch-size",
            type=_bounded(int, low=1, high=10_000),
            default=settings.DELIVERY_BATCH_SIZE,
            help="Deliveries claimed per batch (default %(default)s).",
        )
        parser.add_argument(
            "--interval",
            type=_bounded(float, low=0.1, high=86_400),
            default=settings.DELIVERY_INTERVAL_SECONDS,
            help="Seconds between ticks (default %(default)s).",
        )
        parser.add_argument(
            "--lease",
            type=_bounded(float, low=1, high=86_400),
            default=settings.DELIVERY_LEASE_SECONDS,
            help="Seconds a claimed row may stay processing before the reaper requeues it "
            "(default %(default)s).",
        )
        parser.add_argument(
            "--concurrency",
            type=_bounded(int, low=1, high=64),
            default=settings.DELIVERY_CONCURRENCY,
            help="Sends of one batch in flight at once (default %(default)s).",
        )

    def handle(self, *args, once, batch_size, interval, lease, concurrency, **options):
        lease_td = timedelta(seconds=lease)
        interval_td = timedelta(seconds=interval)
        problem = lease_problem(lease=lease_td, batch_size=batch_size, concurrency=concurrency)
        if problem:
            raise CommandError(problem)

        stopping = threading.Event()

        def stop(signum, frame):
            logger.info("%s received: finishing the current batch", signal.Signals(signum).name)
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

        # A one-shot run is the cron's drain: it has no loop to report as running.
        worker = heartbeat.CRON_WORKER if once else heartbeat.worker_id()
        logger.info(
            "drain_outbox %s: batch=%d concurrency=%d interval=%gs lease=%gs",
            worker,
            batch_size,
            concurrency,
            interval,
            lease,
        )
        failures = 0
        last_beat = last_tidy = float("-inf")
        while True:
            close_old_connections()
            try:
                report = drain.drain_once(
                    batch_size=batch_size, concurrency=concurrency, lease=lease_td
                )
                # While full batches follow each other without a pause, one heartbeat a
                # second is proof enough; the loop's hot path need not write one per batch.
                resting = not report.more_due
                if resting or time.monotonic() - last_beat >= BEAT_AT_MOST_EVERY:
                    heartbeat.beat(worker=worker, interval=interval_td, report=report.as_dict())
                    last_beat = time.monotonic()
                # Idle ticks tidy up after the site, so nothing else needs scheduling.
                if resting and time.monotonic() - last_tidy >= housekeeping.EVERY.total_seconds():
                    tidied = housekeeping.run()
                    last_tidy = time.monotonic()
                    if any(tidied.as_dict().values()):
                        logger.info("housekeeping %s", tidied.as_dict())
            except DatabaseError as exc:
                if once:
                    raise CommandError(f"database error: {exc}") from exc
                failures += 1
                delay = min(2 ** min(failures - 1, 6), interval)
                logger.warning("database unavailable (%s); retrying in %gs", exc, delay)
                with contextlib.suppress(Exception):
                    connection.close()
                if stopping.wait(delay):
                    break
                continue
            failures = 0
            logger.info("tick %s", report.line())
            if once or stopping.is_set():
                break
            if report.more_due:
                continue  # a lane came back full: more may be due, so do not wait
            if stopping.wait(interval):
                break
        if not once:
            with contextlib.suppress(DatabaseError):
                heartbeat.stop(worker=worker)
        logger.info("drain_outbox %s: stopped", worker)
