"""What each recipient has chosen: which categories reach them on which channel, their time
zone, and their quiet hours.

Read by enqueue (notifications/enqueue.py), which writes a delivery the recipient does not
want as skipped; written by the preference centre, the admin and an email's unsubscribe link.
A choice is stored only where it differs from its category's default (ChannelPreference).
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils.translation import gettext as _

from notifications.catalogue import CATEGORIES
from notifications.models import DEMO_CHANNEL, ChannelPreference

# The channels that interrupt (a phone buzzes): quiet hours always hold them. Email waits in
# an inbox, so it is held only when the recipient asks (Recipient.quiet_email).
INTERRUPTING = frozenset({"telegram", "discord", "push"})

TIME_ZONE_MAX = 64  # Recipient.time_zone's max_length


@dataclass(frozen=True)
class Preferences:
    """One recipient's choices, as enqueue reads them (of() loads them in two queries)."""

    time_zone: str = "UTC"
    quiet_start: time | None = None
    quiet_end: time | None = None
    quiet_email: bool = False
    # The stored choices, (category, channel) → on; the rest are the categories' defaults.
    choices: Mapping[tuple[str, str], bool] = field(default_factory=dict)

    def enabled(self, category: str, channel: str) -> bool:
        """Whether category reaches this recipient on channel."""
        chosen = self.choices.get((category, channel))
        return CATEGORIES[category].default_for(channel) if chosen is None else chosen

    def holds(self, channel: str) -> bool:
        """Whether this recipient's quiet hours hold sends on channel."""
        if self.quiet_start is None:
            return False
        return channel in INTERRUPTING or (channel == "email" and self.quiet_email)


# A recipient's settings row (kind 's') and their stored choices (kind 'c'), in one statement:
# enqueue reads them for every notification.
_PREFERENCES_SQL = """
SELECT 's', time_zone, quiet_start, quiet_end, quiet_email, NULL, NULL, NULL
FROM notifications.recipients WHERE user_id = %(user)s
UNION ALL
SELECT 'c', NULL, NULL, NULL, NULL, category, channel, enabled
FROM notifications.channel_preferences WHERE user_id = %(user)s
""".strip()


def of(user) -> Preferences:
    """The preferences of user (a saved user or a user id), in one statement."""
    user_id = getattr(user, "pk", user)
    settings_row = None
    choices = {}
    with connection.cursor() as cursor:
        cursor.execute(_PREFERENCES_SQL, {"user": user_id})
        for kind, zone, start, end, email, category, channel, enabled in cursor.fetchall():
            if kind == "s":
                settings_row = (zone, start, end, email)
            else:
                choices[(category, channel)] = enabled
    if settings_row is None:
        return Preferences(choices=choices)
    zone, start, end, email = settings_row
    return Preferences(
        time_zone=zone, quiet_start=start, quiet_end=end, quiet_email=email, choices=choices
    )


def choosable_channels() -> list[str]:
    """The channels a recipient chooses between: every channel the site runs but the
    showcase's demo (sent only to the site's own demo user)."""
    return [name for name in settings.DELIVERY_CHANNELS if name != DEMO_CHANNEL]


def choosable_categories() -> dict[str, object]:
    """The categories a recipient chooses between, in the catalogue's order."""
    return {name: category for name, category in CATEGORIES.items() if category.choosable}


def check(user, *, choices: Mapping[tuple[str, str], bool]) -> None:
    """Raise ValidationError if choose() would refuse choices for user: an unknown category
    or channel, or a required category left on no channel. Reads, writes nothing."""
    channels = choosable_channels()
    for category, channel in choices:
        if category not in CATEGORIES or not CATEGORIES[category].choosable:
            raise ValidationError(_("Unknown category %(name)r.") % {"name": category})
        if channel not in channels:
            raise ValidationError(_("Unknown channel %(name)r.") % {"name": channel})
    after = Preferences(choices={**of(user).choices, **choices})
    for name, category in CATEGORIES.items():
        if category.required and not any(after.enabled(name, ch) for ch in channels):
            raise ValidationError(
                _("%(category)s messages must stay on for at least one channel.")
                % {"category": category.label}
            )


def choose(user, *, choices: Mapping[tuple[str, str], bool]) -> None:
    """Store user's choices ((category, channel) → on) in one transaction.

    Raises ValidationError, storing nothing, where check() refuses them."""
    with transaction.atomic():
        # The user's row locked first, so two saves at once cannot each leave one channel on.
        get_user_model()._default_manager.select_for_update().filter(pk=user.pk).exists()
        check(user, choices=choices)
        for (category, channel), enabled in choices.items():
            if enabled == CATEGORIES[category].default_for(channel):
                ChannelPreference.objects.filter(
                    user=user, category=category, channel=channel
                ).delete()
            else:
                ChannelPreference.objects.update_or_create(
                    user=user, category=category, channel=channel, defaults={"enabled": enabled}
                )


@functools.cache
def _place_zones() -> frozenset[str]:
    """The IANA zones Python knows, but the ones that name no place: "localtime" (whatever
    the server's zone is), "Factory" and "posixrules"."""
    return frozenset(zoneinfo.available_timezones()) - {"localtime", "Factory", "posixrules"}


def validate_time_zone(name: str) -> str:
    """name, when it is an IANA time zone both Python and the database know; else
    ValidationError. The database computes the quiet window's end in it, so its list decides."""
    if not isinstance(name, str) or not name or len(name) > TIME_ZONE_MAX or "\x00" in name:
        raise ValidationError(_("Enter a time zone such as Europe/Berlin."))
    if name not in _place_zones():
        raise ValidationError(
            _("%(name)s is not a time zone; enter one such as Europe/Berlin.") % {"name": name}
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = %s)", [name])
        (known,) = cursor.fetchone()
    if not known:
        raise ValidationError(
            _("The database does not know the time zone %(name)s.") % {"name": name}
        )
    return name
