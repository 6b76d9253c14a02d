from __future__ import annotations

import logging
import signal
import threading
from datetime import timedelta

from django.conf import settings
from django.core.checks import Tags
from django.core.checks.registry import registry
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from notifications import heartbeat
from notifications.checks import lease_problem, shortest_lease
from notifications.drain import Policy
from notifications.management.arguments import bounded
from notifications.worker import Worker

logger = logging.getLogger("notifications.drain_outbox")


class Command(BaseCommand):
    help = (
        "Deliver due notifications from the outbox: a resident loop (one tick every "
        "--interval seconds, again at once while batches come back full), or one batch with "
        "--once for cron. SIGTERM or SIGINT finish the current batch, then exit 0."
    )

    def check(self, *args, **kwargs):
        """Every system check but the URL ones: this process serves no page, and the URL check
        imports every view, the server lane's NumPy and Numba with them (a second of start-up
        and some 150 MB per drain process, for a loop that analyses no image)."""
        registered = registry.registered_checks
        registry.registered_checks = {
            check for check in registered if Tags.urls not in getattr(check, "tags", ())
        }
        try:
            return super().check(*args, **kwargs)
        finally:
            registry.registered_checks = registered

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Drain one batch and exit.")
        parser.add_argument(
            "--batch-size",
            type=bounded(int, low=1, high=10_000),
            default=settings.DELIVERY_BATCH_SIZE,
            help="Deliveries claimed per batch (default %(default)s).",
        )
        parser.add_argument(
            "--interval",
            type=bounded(float, low=0.1, high=86_400),
            default=settings.DELIVERY_INTERVAL_SECONDS,
            help="Seconds between ticks when no wake-up comes: a committed delivery wakes "
            "the loop at once (DELIVERY_LISTEN_URL), the tick finds retries that come due "
            "and rows whose wake-up was lost (default %(default)s).",
        )
        parser.add_argument(
            "--lease",
            type=bounded(float, low=1, high=86_400),
            default=settings.DELIVERY_LEASE_SECONDS,
            help="Seconds a claimed row may stay processing before the reaper requeues it "
            "(default %(default)s).",
        )
        parser.add_argument(
            "--concurrency",
            type=bounded(int, low=1, high=64),
            default=settings.DELIVERY_CONCURRENCY,
            help="Sends of one batch in flight at once (default %(default)s).",
        )

    def handle(self, *args, once, batch_size, interval, lease, concurrency, **options):
        policy = Policy.from_settings().with_changes(
            batch_size=batch_size, concurrency=concurrency, lease=timedelta(seconds=lease)
        )
        problem = lease_problem(lease=policy.lease, batch_size=batch_size, concurrency=concurrency)
        if problem:
            shortest = shortest_lease(batch_size=batch_size, concurrency=concurrency)
            raise CommandError(
                f"{problem} Use --lease {shortest} or more, or a smaller --batch-size or a "
                "larger --concurrency."
            )
        # A one-shot run has no loop to report as running; its heartbeat is the command's,
        # not the cron endpoint's, and it drains with the options given.
        if once:
            worker = Worker(name=heartbeat.COMMAND_WORKER, interval=timedelta(0), policy=policy)
        else:
            worker = Worker(
                name=heartbeat.worker_id(), interval=timedelta(seconds=interval), policy=policy
            )
        stopping = threading.Event()

        def stop(signum, frame):
            logger.info("%s received: finishing the current batch", signal.Signals(signum).name)
            stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        logger.info(
            "drain_outbox %s: batch=%d concurrency=%d interval=%gs lease=%gs",
            worker.name,
            batch_size,
            concurrency,
            interval,
            lease,
        )
        try:
            worker.run(stopping=stopping, once=once)
        except DatabaseError as exc:
            raise CommandError(f"database error: {exc}") from exc
        finally:
            worker.close()
        logger.info("drain_outbox %s: stopped", worker.name)
