"""Deleting what the site leaves behind: expired rate-limit windows and sessions, finished
demo notifications, old finished deliveries (notifications/retention.py, a slice of
PRUNE_SECONDS each time; `manage.py prune_outbox` runs it whole), and the metric rows of drain
processes gone for an hour (folded into one set, notifications/metrics.py).

Nothing here needs a scheduler of its own: the drain loop runs it on idle ticks (at most once
every EVERY), the cron trigger after a drain that emptied the queue, and `manage.py
housekeeping` wherever neither runs. Each delete is bounded (ROUNDS × a thousand rows a
call), so a run never holds many locks or writes a burst of WAL.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from notifications import metrics, retention
from showcases import queue_demo
from v10r import ratelimit

logger = logging.getLogger(__name__)

EVERY = timedelta(minutes=1)
ROUNDS = 10
BATCH = 1000
# Longer than the longest rate-limit window the site uses (the admin login's quarter hour).
WINDOWS_OLDER_THAN = timedelta(hours=1)
# How long one housekeeping run may spend pruning the outbox: the drain loop's idle tick must
# stay short. A backlog is worked off a slice a minute, from where the last slice stopped.
PRUNE_SECONDS = 2.0


@dataclass(frozen=True)
class Tidied:
    rate_limit_windows: int
    sessions: int
    demo_notifications: int
    deliveries_pruned: int
    metric_rows_folded: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def run() -> Tidied:
    """Delete expired and finished rows, a bounded number of each; return how many."""
    return Tidied(
        rate_limit_windows=_repeat(
            "rate-limit windows",
            lambda: ratelimit.prune(older_than=WINDOWS_OLDER_THAN, limit=BATCH),
        ),
        sessions=_repeat("sessions", _prune_sessions),
        demo_notifications=_repeat("demo notifications", lambda: queue_demo.prune(limit=BATCH)),
        deliveries_pruned=_prune_outbox(),
        metric_rows_folded=_once("metric rows", metrics.fold_retired),
    )


def _prune_outbox() -> int:
    try:
        policy = retention.RetentionPolicy.from_settings(max_seconds=PRUNE_SECONDS)
        pruned = retention.prune(policy)
    except DatabaseError:
        logger.exception("housekeeping: pruning the outbox failed")
        return 0
    return pruned.deliveries


def _once(what: str, delete) -> int:
    try:
        return delete()
    except DatabaseError:
        logger.exception("housekeeping: folding %s failed", what)
        return 0


def _repeat(what: str, delete) -> int:
    total = 0
    try:
        for _ in range(ROUNDS):
            deleted = delete()
            total += deleted
            if deleted < BATCH:
                break
    except DatabaseError:
        # One kind failing must not stop the others, nor the drain loop or cron request that
        # tidies up on the side; a database that is really gone, they notice themselves.
        logger.exception("housekeeping: deleting %s failed", what)
    return total


def _prune_sessions() -> int:
    if settings.SESSION_ENGINE != "django.contrib.sessions.backends.db":
        return 0  # other engines expire their own keys (cache) or are not ours to sweep
    from django.contrib.sessions.models import Session

    # Django's clearsessions deletes every expired row in one statement; this takes a
    # thousand at a time (served by the expire_date index).
    expired = Session.objects.filter(expire_date__lt=timezone.now()).values("pk")[:BATCH]
    deleted, _ = Session.objects.filter(pk__in=expired).delete()
    return deleted
