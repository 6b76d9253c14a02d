"""The reader's time zone: a signed-in user's saved one (Recipient.time_zone, set in the
preference centre), else the site's (settings.TIME_ZONE).

Django's way: the middleware activates the zone for the request, so every `|date`, every
`localtime` and the admin's lists show wall-clock times in it; the pages that show times say
which zone they are in (templates/time_zone_note.html).

The zone is read when the first time is shown, not before: reading it reads the session, and
a response that read the session varies on the cookie, which the service worker refuses to
keep (docs/service-worker.md). The offline page and the manifest show no time, so they stay
the same for everyone, as the inbox badge's count does (accounts/context_processors.py)."""

from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from functools import cached_property

from django.utils import timezone

from recipients.models import Recipient

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


class ReaderZone(tzinfo):
    """The request's reader's zone, looked up on first use; it then answers as that zone."""

    def __init__(self, request) -> None:
        self._request = request

    @cached_property
    def zone(self) -> tzinfo:
        return saved_zone(getattr(self._request, "user", None)) or timezone.get_default_timezone()

    def _as_zone(self, moment: datetime | None) -> datetime | None:
        return None if moment is None else moment.replace(tzinfo=self.zone)

    def utcoffset(self, moment: datetime | None) -> timedelta | None:
        return self.zone.utcoffset(self._as_zone(moment))

    def dst(self, moment: datetime | None) -> timedelta | None:
        return self.zone.dst(self._as_zone(moment))

    def tzname(self, moment: datetime | None) -> str | None:
        return self.zone.tzname(self._as_zone(moment))

    def fromutc(self, moment: datetime) -> datetime:
        return self.zone.fromutc(moment.replace(tzinfo=self.zone)).replace(tzinfo=self)

    def __str__(self) -> str:
        # The IANA name ("Europe/Berlin"): what Django hands the database, and what pages say.
        return str(self.zone)

    def __repr__(self) -> str:
        return f"ReaderZone({self})"

    def __reduce__(self):
        # A copy or a pickle of a time shown to the reader carries the zone itself, never the
        # request this one holds.
        return (zoneinfo.ZoneInfo, (str(self),))


class TimeZoneMiddleware:
    """Activate the request's reader's zone (read once, and only if a time is shown).

    One primary-key read per request that shows a time to a signed-in reader: the zone can
    change in the centre or the admin at any moment, and a copy in the session would go stale
    until the next sign-in."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        timezone.activate(ReaderZone(request))
        try:
            return self.get_response(request)
        finally:
            # A thread serves other requests next: none may inherit this reader's zone.
            timezone.deactivate()
