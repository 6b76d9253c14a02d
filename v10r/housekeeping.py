"""The site's own tidying up: expired rate-limit windows and sessions.

It runs as a receiver of the queue's outbox_idle signal (connected in V10rConfig.ready()),
beside each other app's receivers (the showcase's demo rows, the unconfirmed sign-ups), so the
housekeeping job (jobs/tasks.py) calls it without importing the site: every five minutes
from the jobs' sweep, and from `manage.py housekeeping`.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core import pruning, ratelimit

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


def _prune_sessions() -> int:
    if settings.SESSION_ENGINE != "django.contrib.sessions.backends.db":
        return 0  # other engines expire their own keys (cache) or are not ours to sweep
    from django.contrib.sessions.models import Session

    # Django's clearsessions deletes every expired row in one statement; this takes a
    # thousand at a time (served by the expire_date index).
    expired = Session.objects.filter(expire_date__lt=timezone.now()).values("pk")[: pruning.BATCH]
    deleted, _ = Session.objects.filter(pk__in=expired).delete()
    return deleted
