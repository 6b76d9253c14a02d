"""The site's own tidying up: expired rate-limit windows and sessions.

It runs as a receiver of the queue's outbox_idle signal (connected in V10rConfig.ready()),
beside the outbox's own pruning and each app's receivers (the showcase's demo rows), so the
queue calls it without importing the site: on the drain loop's idle ticks, after a cron drain
that emptied the queue, and from `manage.py housekeeping` wherever neither runs.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core import pruning, ratelimit
from notifications import worker

# Longer than the longest rate-limit window the site uses (the admin login's quarter hour).
WINDOWS_OLDER_THAN = timedelta(hours=1)


def tidy(sender, **kwargs) -> dict[str, int]:
    """outbox_idle's receiver: delete expired rate-limit windows and sessions."""
    return {
        "rate_limit_windows": pruning.repeat(
            "rate-limit windows",
            lambda: ratelimit.prune(older_than=WINDOWS_OLDER_THAN, limit=pruning.BATCH),
        ),
        "sessions": pruning.repeat("sessions", _prune_sessions),
    }


def run() -> worker.Tidied:
    """Tidy up once, as a resting queue does: the outbox and every outbox_idle receiver."""
    return worker.tidy()


def _prune_sessions() -> int:
    if settings.SESSION_ENGINE != "django.contrib.sessions.backends.db":
        return 0  # other engines expire their own keys (cache) or are not ours to sweep
    from django.contrib.sessions.models import Session

    # Django's clearsessions deletes every expired row in one statement; this takes a
    # thousand at a time (served by the expire_date index).
    expired = Session.objects.filter(expire_date__lt=timezone.now()).values("pk")[: pruning.BATCH]
    deleted, _ = Session.objects.filter(pk__in=expired).delete()
    return deleted
