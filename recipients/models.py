"""Who may receive what: each recipient's settings and choices, their addresses on the
channels, a webhook endpoint's signing secrets and a browser's push keys.

The tables stay in PostgreSQL schema `notifications`, where they were made before this app
held them (recipients/migrations/0001_initial.py): a table's name says where it lives, and
nothing needed to move.
"""

from __future__ import annotations

from django.conf import settings
from django.core import checks
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.database import DatabaseNow

# The web push channel's name: its addresses are subscriptions, several a user. Named here,
# not asked of the channel (Channel.several_addresses), because the constraints below are
# partial unique indexes: PostgreSQL holds them on every write, and can ask no Python class.
# A site's own channel with several addresses needs its name in them (a migration);
# ChannelAddress.check says so rather than let the database refuse its second address.
WEBPUSH = "webpush"


class ChannelAddress(models.Model):
    """Where a user receives a channel other than email (which comes from the auth user)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="channel_addresses"
    )
    channel = models.CharField(_("channel"), max_length=32)
    address = models.CharField(
        _("address"),
        max_length=500,
        help_text=_(
            "A Telegram chat id, a Discord user id, a webhook endpoint's URL, or a browser's "
            "push endpoint."
        ),
    )
    is_active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created"), db_default=DatabaseNow())
    # Set by the drain when the provider says never again: a bot the user blocked, a webhook
    # endpoint that answered 410 Gone. A staff member who fixes it makes it active again.
    deactivated_at = models.DateTimeField(_("deactivated"), null=True, blank=True)
    deactivated_reason = models.CharField(_("why"), max_length=500, blank=True, default="")

    class Meta:
        db_table = 'notifications"."channel_addresses'
        verbose_name = _("channel address")
        verbose_name_plural = _("channel addresses")
        # The dashboard's Probe makes the site call a provider with its bot token: like Retry,
        # an act of its own, not part of looking at the addresses.
        permissions = [("probe_channel", _("Can probe a channel's provider"))]
        constraints = [
            # One active address a channel, except web push: a user has a subscription on
            # every browser they allowed, and each is an address of its own.
            models.UniqueConstraint(
                fields=["user", "channel"],
                condition=Q(is_active=True) & ~Q(channel=WEBPUSH),
                name="channel_addresses_one_active",
            ),
            # A push endpoint is one browser's: when another user subscribes from it (a shared
            # computer), the subscription moves to them (recipients/subscriptions.py).
            models.UniqueConstraint(
                fields=["channel", "address"],
                condition=Q(is_active=True, channel=WEBPUSH),
                name="channel_addresses_one_push_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}:{self.address}"

    @classmethod
    def check(cls, **kwargs):
        """The model's checks, and that no configured channel other than web push says it has
        several addresses a user: the one-active constraint would refuse its second."""
        import transports as channels

        errors = super().check(**kwargs)
        if not isinstance(getattr(settings, "DELIVERY_CHANNELS", None), dict):
            return errors  # transports.E001 says so
        for name, path in settings.DELIVERY_CHANNELS.items():
            try:
                channel = channels.get(name)
            except ImportError:
                continue  # transports.E002 says so
            if name != WEBPUSH and getattr(channel, "several_addresses", False):
                errors.append(
                    checks.Error(
                        f"The channel {name!r} ({path}) sends to several addresses a user, "
                        "but the database keeps one active address a user for every channel "
                        f"but {WEBPUSH!r}: its second address would be refused.",
                        hint="Add its name to ChannelAddress's constraints (a migration), or "
                        "give it one address a user.",
                        obj=cls,
                        id="recipients.E010",
                    )
                )
        return errors


class Recipient(models.Model):
    """A user's delivery settings: the language their notifications are written in, their
    time zone, and their quiet hours. A user without a row has the defaults (the site's
    language, UTC, no quiet hours). What each category reaches is in ChannelPreference."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="notification_recipient",
    )
    language = models.CharField(
        _("language"), max_length=8, choices=settings.LANGUAGES, default=settings.LANGUAGE_CODE
    )
    # An IANA name ("Europe/Berlin"); recipients/preferences.py checks it against the
    # database's own list, since the database computes the quiet window's end in it.
    time_zone = models.CharField(_("time zone"), max_length=64, default="UTC", db_default="UTC")
    # A daily window in the recipient's time zone, such as 22:00–07:00 (start after end: it
    # spans midnight). Both or neither; equal times are refused (a window of nothing or of
    # everything is ambiguous).
    quiet_start = models.TimeField(_("quiet hours from"), null=True, blank=True)
    quiet_end = models.TimeField(_("quiet hours until"), null=True, blank=True)
    # Whether quiet hours hold email too (they always hold the channels that interrupt:
    # recipients/preferences.py, INTERRUPTING).
    quiet_email = models.BooleanField(
        _("quiet hours hold email too"), default=False, db_default=False
    )

    class Meta:
        db_table = 'notifications"."recipients'
        verbose_name = _("recipient's settings")
        verbose_name_plural = _("recipients' settings")
        constraints = [
            models.CheckConstraint(
                condition=Q(quiet_start__isnull=True, quiet_end__isnull=True)
                | (
                    Q(quiet_start__isnull=False, quiet_end__isnull=False)
                    & ~Q(quiet_start=models.F("quiet_end"))
                ),
                name="recipients_quiet_window_whole",
            )
        ]

    def __str__(self) -> str:
        # Staff read it as the page's title and in its history: the person, by username.
        return self.user.get_username()


class ChoicesVersion(models.Model):
    """How many times a recipient's choices have changed (their settings, a stored choice, a
    digest): bumped in the changing transaction (recipients/preferences.py,
    bump_version). A queued delivery keeps the version it was decided under; a claim that
    finds the recipient's higher decides it again. No row: version 0, nothing changed. A
    table of its own, so no save of a Recipient can write an older version back."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    version = models.PositiveBigIntegerField(_("version"), default=0, db_default=0)

    class Meta:
        db_table = 'notifications"."choices_versions'
        verbose_name = _("choices version")
        verbose_name_plural = _("choices versions")

    def __str__(self) -> str:
        return f"{self.user_id} · {self.version}"


class ChannelPreference(models.Model):
    """A recipient's choice for one category on one channel, where it differs from the
    category's default (recipients/catalogue.py, CATEGORIES). No row: the default."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="channel_preferences",
        verbose_name=_("recipient"),
        # The unique (user, category, channel) index starts with this column already.
        db_index=False,
    )
    category = models.CharField(_("category"), max_length=64)
    channel = models.CharField(_("channel"), max_length=32)
    enabled = models.BooleanField(_("on"))
    updated_at = models.DateTimeField(_("changed"), db_default=DatabaseNow())

    class Meta:
        db_table = 'notifications"."channel_preferences'
        verbose_name = _("channel preference")
        verbose_name_plural = _("channel preferences")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "category", "channel"], name="channel_preferences_one_each"
            )
        ]

    def __str__(self) -> str:
        return f"#{self.user_id} {self.category}/{self.channel}: {'on' if self.enabled else 'off'}"


class Cadence(models.TextChoices):
    """How often a category reaches a recipient: each notification as it comes, or gathered
    into one digest per window (notifications/digests.py)."""

    INSTANT = "instant", _("as it happens")
    HOURLY = "hourly", _("hourly digest")
    DAILY = "daily", _("daily digest")
    WEEKLY = "weekly", _("weekly digest")


class DigestChoice(models.Model):
    """A recipient's digest for one category, where they chose one: the category's
    notifications wait for the window's end (at hour, on weekday for a weekly one, in the
    recipient's time zone) and go out together. No row: each is sent as it comes."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="digest_choices",
        verbose_name=_("recipient"),
        # The unique (user, category) index starts with this column already.
        db_index=False,
    )
    category = models.CharField(_("category"), max_length=64)
    cadence = models.CharField(_("how often"), max_length=16, choices=Cadence.choices)
    # Daily and weekly: the hour of the day it goes out, 0–23, on the recipient's clock.
    hour = models.PositiveSmallIntegerField(_("at hour"), null=True, blank=True)
    # Weekly: the day, 0 (Monday) to 6 (Sunday), as Python's date.weekday() counts.
    weekday = models.PositiveSmallIntegerField(_("on weekday"), null=True, blank=True)
    updated_at = models.DateTimeField(_("changed"), db_default=DatabaseNow())

    class Meta:
        db_table = 'notifications"."digest_choices'
        verbose_name = _("digest choice")
        verbose_name_plural = _("digest choices")
        constraints = [
            models.UniqueConstraint(fields=["user", "category"], name="digest_choices_one_each"),
            # Each cadence with exactly the fields it needs; instant is no row at all.
            models.CheckConstraint(
                condition=Q(cadence=Cadence.HOURLY, hour__isnull=True, weekday__isnull=True)
                | Q(cadence=Cadence.DAILY, hour__gte=0, hour__lte=23, weekday__isnull=True)
                | Q(
                    cadence=Cadence.WEEKLY,
                    hour__gte=0,
                    hour__lte=23,
                    weekday__gte=0,
                    weekday__lte=6,
                ),
                name="digest_choices_cadence_fields",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.user_id} {self.category}: {self.cadence}"


class WebhookSecret(models.Model):
    """The signing secrets of one webhook endpoint (a ChannelAddress on the webhook channel).

    Two may be valid at once: rotating makes the current one previous and a new one current,
    and every request is signed with both until the previous one is dropped, so a receiver
    can switch over whenever it likes."""

    address = models.OneToOneField(
        ChannelAddress,
        on_delete=models.CASCADE,
        related_name="webhook_secret",
        verbose_name=_("endpoint"),
    )
    secret = models.CharField(_("secret"), max_length=200)
    previous_secret = models.CharField(_("previous secret"), max_length=200, blank=True)
    rotated_at = models.DateTimeField(_("rotated"), null=True, blank=True)

    class Meta:
        db_table = 'notifications"."webhook_secrets'
        verbose_name = _("webhook secret")
        verbose_name_plural = _("webhook secrets")

    def __str__(self) -> str:
        return f"#{self.address_id}"

    def secrets(self) -> list[str]:
        return [s for s in (self.secret, self.previous_secret) if s]


class PushSubscription(models.Model):
    """The keys of one browser's Web Push subscription (a ChannelAddress on the webpush
    channel, whose address is the push service's endpoint URL): what RFC 8291 encrypts each
    payload to. Both are the browser's, base64url as PushSubscription.toJSON() gives them."""

    address = models.OneToOneField(
        ChannelAddress,
        on_delete=models.CASCADE,
        related_name="push_subscription",
        verbose_name=_("endpoint"),
    )
    # The browser's P-256 public key, uncompressed (65 bytes: 87 characters of base64url).
    p256dh = models.CharField(_("public key"), max_length=100)
    # The 16-byte authentication secret (22 characters).
    auth = models.CharField(_("authentication secret"), max_length=32)
    # What the browser said it was when it subscribed, so a user can tell devices apart.
    user_agent = models.CharField(_("browser"), max_length=200, blank=True, default="")

    class Meta:
        db_table = 'notifications"."push_subscriptions'
        verbose_name = _("push subscription")
        verbose_name_plural = _("push subscriptions")

    def __str__(self) -> str:
        return f"#{self.address_id}"


class AudienceKind(models.TextChoices):
    STATIC = "static", _("chosen members")
    GROUP = "group", _("a group's members")
    ACTIVE = "active", _("every active user")
    REGISTERED = "registered", _("registered in code")


class Audience(models.Model):
    """A named set of recipients (recipients/audiences.py): members chosen one by one or from
    a CSV (static), or whoever is in a group, every active user, or a queryset a site
    registered under a name, read when asked."""

    name = models.CharField(_("name"), max_length=200, unique=True)
    key = models.SlugField(
        _("key"),
        max_length=100,
        unique=True,
        help_text=_("How code names the audience: letters, digits, hyphens and underscores."),
    )
    kind = models.CharField(
        _("kind"), max_length=16, choices=AudienceKind.choices, default=AudienceKind.STATIC
    )
    group = models.ForeignKey(
        "auth.Group",
        verbose_name=_("group"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    registered_name = models.CharField(
        _("registered name"),
        max_length=100,
        blank=True,
        default="",
        help_text=_("The name a site registered its queryset under, in code."),
    )
    description = models.TextField(_("description"), blank=True, default="")
    created_at = models.DateTimeField(_("created"), db_default=DatabaseNow())
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        db_table = 'notifications"."audiences'
        verbose_name = _("audience")
        verbose_name_plural = _("audiences")
        ordering = ["name"]
        constraints = [
            # Each kind has exactly what it reads its members from, and nothing else.
            models.CheckConstraint(
                condition=(
                    Q(kind=AudienceKind.GROUP, group__isnull=False, registered_name="")
                    | Q(kind=AudienceKind.REGISTERED, group__isnull=True) & ~Q(registered_name="")
                    | Q(
                        kind__in=[AudienceKind.STATIC, AudienceKind.ACTIVE],
                        group__isnull=True,
                        registered_name="",
                    )
                ),
                name="audiences_kind_source",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Say in words what the kind's constraint holds: each kind reads its own source."""
        errors = {}
        if self.kind == AudienceKind.GROUP and self.group_id is None:
            errors["group"] = _("Choose the group whose members are the audience.")
        if self.kind != AudienceKind.GROUP and self.group_id is not None:
            errors["group"] = _("Only an audience of a group's members has a group.")
        if self.kind == AudienceKind.REGISTERED and not self.registered_name:
            errors["registered_name"] = _("Name the queryset registered in code.")
        if self.kind != AudienceKind.REGISTERED and self.registered_name:
            errors["registered_name"] = _("Only an audience registered in code has this name.")
        if errors:
            raise ValidationError(errors)


class AudienceMember(models.Model):
    """A member of a static audience."""

    audience = models.ForeignKey(
        Audience, on_delete=models.CASCADE, related_name="members", verbose_name=_("audience")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    added_at = models.DateTimeField(_("added"), db_default=DatabaseNow())

    class Meta:
        db_table = 'notifications"."audience_members'
        verbose_name = _("audience member")
        verbose_name_plural = _("audience members")
        constraints = [
            models.UniqueConstraint(fields=["audience", "user"], name="audience_members_once")
        ]

    def __str__(self) -> str:
        return f"{self.audience_id} · {self.user_id}"
