"""The reader's time zone: a signed-in user's saved one (Recipient.time_zone, set in the
preference centre), else the site's (settings.TIME_ZONE).

Django's way: the middleware activates the zone for the request, so every `|date`, every
`localtime` and the admin's lists show wall-clock times in it; the pages that show times say
which zone they are in (templates/time_zone_note.html)."""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Callable

from django.utils import timezone

from notifications.models import Recipient

log = logging.getLogger(__name__)


def saved_zone(user) -> zoneinfo.ZoneInfo | None:
    """user's saved zone; None for a visitor, a user who saved none, or a name this Python
    does not know (the centre refuses those, but a row may predate a tzdata update)."""
    if user is None or not user.is_authenticated:
        return None
    name = Recipient.objects.filter(user_id=user.pk).values_list("time_zone", flat=True).first()
    if not name:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        log.warning("Unknown time zone %r saved for user %s; showing the site's.", name, user.pk)
        return None


class TimeZoneMiddleware:
    """Activate the signed-in reader's saved zone for the request, else the site's.

    One primary-key read per signed-in request: the zone can change in the centre or the
    admin at any moment, and a copy in the session would go stale until the next sign-in."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        zone = saved_zone(getattr(request, "user", None))
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            # A thread serves other requests next: none may inherit this reader's zone.
            timezone.deactivate()
