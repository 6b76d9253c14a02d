"""What each recipient has chosen: which categories reach them on which channel, which come
as a digest and when, their time zone, and their quiet hours.

Read by enqueue (notifications/enqueue.py), which writes a delivery the recipient does not
want as skipped; written by the preference centre, the admin and an email's unsubscribe link.
A choice is stored only where it differs from its category's default (ChannelPreference); a
digest only where one is chosen (DigestChoice: no row, each notification comes as it happens).
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Iterable, Mapping
from datetime import time
from types import MappingProxyType
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils.translation import gettext as _

import transports as channels
from core.database import DatabaseNow
from recipients import quiet
from recipients.catalogue import CATEGORIES
from recipients.models import Cadence, ChannelPreference, DigestChoice
from recipients.windows import Digest
from transports.base import AddressSource, QuietHours

TIME_ZONE_MAX = 64  # Recipient.time_zone's max_length


# Read-only: one empty mapping is every default's.
_NONE: Mapping = MappingProxyType({})


# A named tuple, not a frozen dataclass: a drain makes one per recipient of every batch, and a
# frozen dataclass's __init__ (an object.__setattr__ per field) cost as much as reading the
# choices from the database. Immutable all the same.
class Preferences(NamedTuple):
    """One recipient's choices, as enqueue and the drains read them (of_each)."""

    time_zone: str = "UTC"
    quiet_start: time | None = None
    quiet_end: time | None = None
    quiet_email: bool = False
    # The stored choices, (category, channel) → on; the rest are the categories' defaults.
    choices: Mapping[tuple[str, str], bool] = _NONE
    # The categories taken as a digest, and how (DigestChoice); the rest come as they happen.
    digests: Mapping[str, Digest] = _NONE
    # The language their notifications are written in; None: they have no settings row, and
    # get the site's.
    language: str | None = None
    # Recipient.choices_version when these were read: what the rows decided by them keep.
    version: int = 0

    @property
    def quiet(self) -> quiet.Hours | None:
        """Their quiet hours, when they have any."""
        if self.quiet_start is None or self.quiet_end is None:
            return None
        return quiet.Hours(self.time_zone, self.quiet_start, self.quiet_end)

    def enabled(self, category: str, channel: str) -> bool:
        """Whether category reaches this recipient on channel."""
        chosen = self.choices.get((category, channel))
        return CATEGORIES[category].default_for(channel) if chosen is None else chosen

    def digest_for(self, category: str) -> Digest | None:
        """How category is gathered for this recipient: None when each is sent as it comes,
        which a required category always is."""
        if CATEGORIES[category].required:
            return None
        return self.digests.get(category)

    def holds(self, channel: str) -> bool:
        """Whether this recipient's quiet hours hold sends on channel: always those of a
        channel that interrupts, those of one that waits to be read (email) when they ask
        (Recipient.quiet_email), never the others (Channel.quiet_hours)."""
        if self.quiet_start is None:
            return False
        found = channels.get(channel)
        if found is None:
            return False
        kind = found.quiet_hours
        return kind == QuietHours.ALWAYS or (kind == QuietHours.WHEN_ASKED and self.quiet_email)


# Recipients' settings rows (kind 's'), their stored choices ('c'), their digests ('d') and
# their choices' versions ('v'), in one statement: enqueue reads them for every notification,
# a drain for the batch rows whose recipients changed something since. The ids
# come as one array literal, a string: Django's backend binds on the client, and quoting a
# Python list element by element, three times over, cost a drain's batch more than the query.
_PREFERENCES_SQL = """
SELECT 's', user_id, time_zone, quiet_start, quiet_end, quiet_email, language, NULL, NULL,
       NULL::smallint, NULL::smallint, NULL::bigint
FROM notifications.recipients WHERE user_id = ANY(%(users)s::integer[])
UNION ALL
SELECT 'c', user_id, NULL, NULL, NULL, NULL, category, channel, enabled, NULL, NULL, NULL
FROM notifications.channel_preferences WHERE user_id = ANY(%(users)s::integer[])
UNION ALL
SELECT 'd', user_id, NULL, NULL, NULL, NULL, category, cadence, NULL, hour, weekday, NULL
FROM notifications.digest_choices WHERE user_id = ANY(%(users)s::integer[])
UNION ALL
SELECT 'v', user_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, version
FROM notifications.choices_versions WHERE user_id = ANY(%(users)s::integer[])
""".strip()


def of(user) -> Preferences:
    """The preferences of user (a saved user or a user id), in one statement."""
    user_id = getattr(user, "pk", user)
    return of_each([user_id])[user_id]


def of_each(user_ids: Iterable[int]) -> dict[int, Preferences]:
    """The preferences of each of user_ids, in one statement (a drain's batch reads them so)."""
    ids = list(dict.fromkeys(user_ids))
    if not ids:
        return {}
    # A recipient without a settings row keeps Preferences' defaults for these.
    recipients: dict[int, tuple] = {}
    choices: dict[int, dict] = {}
    digests: dict[int, dict] = {}
    with connection.cursor() as cursor:
        users = "{" + ",".join(str(int(user_id)) for user_id in ids) + "}"
        cursor.execute(_PREFERENCES_SQL, {"users": users})
        rows = cursor.fetchall()
    versions: dict[int, int] = {}
    for kind, user_id, zone, start, end, email, name, channel, enabled, hour, weekday, v in rows:
        if kind == "s":
            recipients[user_id] = (zone, start, end, email, name)
        elif kind == "v":
            versions[user_id] = v
        elif kind == "c":
            choices.setdefault(user_id, {})[(name, channel)] = enabled
        elif name in CATEGORIES:
            # name is the category and channel the cadence here.
            digests.setdefault(user_id, {})[name] = Digest(channel, hour, weekday)
    found = {}
    nothing = Preferences()
    for user_id in ids:
        stored = recipients.get(user_id)
        chosen, gathered = choices.get(user_id, _NONE), digests.get(user_id, _NONE)
        version = versions.get(user_id, 0)
        if stored is None:
            found[user_id] = nothing._replace(choices=chosen, digests=gathered, version=version)
        else:
            zone, start, end, email, language = stored
            found[user_id] = Preferences(
                zone, start, end, email, chosen, gathered, language, version
            )
    return found


def choosable_channels() -> list[str]:
    """The channels a recipient chooses between: every channel the site runs that says it is
    chosen (Channel.choosable; not one a site keeps to itself, like a showcase's)."""
    return [name for name, channel in channels.configured().items() if channel.choosable]


def typed_address_channels() -> list[str]:
    """The choosable channels whose address the recipient types (a chat id, a URL): not
    email (the account's), not the inbox (the account itself), not web push (a browser's
    subscription, made by the browser)."""
    return [
        name
        for name in choosable_channels()
        if channels.get(name).address_source == AddressSource.CHANNEL_ADDRESS
        and channels.get(name).typed_address
    ]


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


def digest_categories() -> dict[str, object]:
    """The categories a recipient may take as a digest: the choosable ones but the required,
    which are always sent at once."""
    return {name: c for name, c in choosable_categories().items() if not c.required}


def _whole(value) -> bool:
    # An hour or a day is a whole number; True is not one, though Python counts it as 1.
    return isinstance(value, int) and not isinstance(value, bool)


def check_digest(category: str, digest: Digest | None) -> Digest | None:
    """Return digest as choose_digests stores it for category: None for as it happens (no
    row), an hourly one without hour or day, a daily one without day. Raise ValidationError,
    keyed by the part at fault ("category", "cadence", "hour" or "weekday"), for a category no
    one takes as a digest, or a digest without the hour or day it needs. Writes nothing."""
    if category not in CATEGORIES or not CATEGORIES[category].choosable:
        raise ValidationError({"category": _("Unknown category %(name)r.") % {"name": category}})
    if digest is None or digest.cadence == Cadence.INSTANT:
        return None
    if CATEGORIES[category].required:
        raise ValidationError(
            {
                "category": _("%(category)s messages are always sent at once, never in a digest.")
                % {"category": CATEGORIES[category].label}
            }
        )
    if digest.cadence not in Cadence.values:
        raise ValidationError(
            {"cadence": _("Choose how often: as it happens, or an hourly, daily or weekly digest.")}
        )
    if digest.cadence == Cadence.HOURLY:
        return Digest(Cadence.HOURLY.value)
    errors = {}
    if digest.hour is None:
        errors["hour"] = _("Choose the hour the digest goes out.")
    elif not _whole(digest.hour) or not 0 <= digest.hour <= 23:
        errors["hour"] = _("The hour is a whole number from 0 to 23.")
    if digest.cadence == Cadence.WEEKLY:
        if digest.weekday is None:
            errors["weekday"] = _("Choose the day a weekly digest goes out.")
        elif not _whole(digest.weekday) or not 0 <= digest.weekday <= 6:
            errors["weekday"] = _("The day is a number from 0 (Monday) to 6 (Sunday).")
    if errors:
        raise ValidationError(errors)
    weekday = digest.weekday if digest.cadence == Cadence.WEEKLY else None
    return Digest(Cadence(digest.cadence).value, digest.hour, weekday)


def check_digests(digests: Mapping[str, Digest | None]) -> dict[str, Digest | None]:
    """The digests (category → Digest, or None for as it happens) as choose_digests stores
    them; ValidationError, naming each category at fault, where check_digest refuses one."""
    checked, errors = {}, []
    for category, digest in digests.items():
        try:
            checked[category] = check_digest(category, digest)
        except ValidationError as exc:
            for part, messages in exc.message_dict.items():
                for message in messages:
                    # A refused category names itself; an hour or a day says whose it is.
                    if part != "category":
                        message = _("%(category)s: %(error)s") % {
                            "category": CATEGORIES[category].label,
                            "error": message,
                        }
                    errors.append(ValidationError(message))
    if errors:
        raise ValidationError(errors)
    return checked


def choose_digests(user, *, digests: Mapping[str, Digest | None]) -> None:
    """Store user's digests (category → Digest, or None for as it happens) in one
    transaction. Raises ValidationError, storing nothing, where check_digests refuses one."""
    with transaction.atomic():
        # The user's row locked as choose() locks it: one save of their settings at a time.
        get_user_model()._default_manager.select_for_update().filter(pk=user.pk).exists()
        for category, digest in check_digests(digests).items():
            if digest is None:
                DigestChoice.objects.filter(user=user, category=category).delete()
            else:
                DigestChoice.objects.update_or_create(
                    user=user,
                    category=category,
                    defaults={
                        "cadence": digest.cadence,
                        "hour": digest.hour,
                        "weekday": digest.weekday,
                        "updated_at": DatabaseNow(),
                    },
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


# What a recipient changes applies to what is already queued, whoever saves it (the centre,
# the admin, an unsubscribe link): the receiver below bumps their choices' version, and each
# drain reads the choices again when it claims a row decided under an older one
# (notifications/drain.py), where it skips what is no longer wanted and holds what quiet
# hours now hold. It runs in the saving transaction, so the change and its version commit
# together.


# One more version of a recipient's choices (ChoicesVersion). The row stays locked until the
# change commits, so two changes at once count one after the other.
BUMP_VERSION_SQL = """
INSERT INTO notifications.choices_versions AS v (user_id, version)
VALUES (%(user_id)s, 1)
ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1
""".strip()


def bump_version(user_id: int) -> None:
    """Mark user_id's choices changed: every queued row decided before is decided again at
    its claim. Runs in the changing transaction, so the claim sees both or neither."""
    with connection.cursor() as cursor:
        cursor.execute(BUMP_VERSION_SQL, {"user_id": user_id})


def choices_changed(sender, instance, **kwargs) -> None:
    """Whatever of a recipient's choices was saved or deleted (their settings, a category on
    a channel, a digest), the rows decided before are decided again at their claim. The
    engine's own receivers put back what the change may no longer hold
    (notifications/choices.py)."""
    bump_version(instance.user_id)
