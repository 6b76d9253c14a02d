"""Forms and form rules the staff console and the site's own pages share: the address of a
channel (checked as the drain would check it), the grid of what each category reaches on each
channel, how often each category comes (as it happens or a digest), the quiet window and the
time zone. accounts/ (the preference centre) and
recipients/admin/ both build on them, so a rule is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django import forms
from django.core.exceptions import ValidationError
from django.utils.dates import WEEKDAYS
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

import transports as channels
from recipients import preferences
from recipients.models import Cadence, ChannelAddress, WebhookSecret
from recipients.windows import Digest
from transports import signing
from transports.base import AddressSource


def channel_label(name: str) -> str:
    """What people call the channel configured as name (Channel.label), or its name."""
    channel = channels.get(name)
    return channel.shown_label if channel is not None else name


def choice_field_name(category: str, channel: str) -> str:
    return f"on-{category}-{channel}"


def add_choice_fields(form: forms.BaseForm, *, chosen: preferences.Preferences) -> dict:
    """Add a box to form for each choosable category on each choosable channel, checked as
    chosen says; return {field name: (category, channel)}."""
    grid = {}
    for category in preferences.choosable_categories():
        for channel in preferences.choosable_channels():
            name = choice_field_name(category, channel)
            form.fields[name] = forms.BooleanField(
                label=channel_label(channel),
                required=False,
                initial=chosen.enabled(category, channel),
                # The page carries each box's value as it was when loaded (changed_choices).
                show_hidden_initial=True,
            )
            grid[name] = (category, channel)
    return grid


def changed_choices(form: forms.BaseForm, grid: Mapping[str, tuple[str, str]]) -> dict:
    """The boxes of grid the reader changed: (category, channel) → on. Each box is compared
    with its value when the page was loaded (its hidden initial), or, from a client that does
    not send one, with the value stored now; a box left as it was is not a choice, so what the
    user chose elsewhere meanwhile (an unsubscribe link, another tab) stands."""
    changed = {}
    for name, pair in grid.items():
        field, now = form.fields[name], bool(form.cleaned_data.get(name))
        shown = form[name].html_initial_name
        before = field.to_python(form.data[shown]) if shown in form.data else field.initial
        if now != bool(before):
            changed[pair] = now
    return changed


# A digest's hour as the page offers it, on the recipient's clock; the day is Django's own
# names, Monday first (0), as DigestChoice counts.
DIGEST_HOURS = [(hour, f"{hour:02d}:00") for hour in range(24)]
# What the hour and day fields show before anyone chose them (ignored as it happens).
DIGEST_HOUR_SHOWN = 9
DIGEST_WEEKDAY_SHOWN = 0


@dataclass(frozen=True)
class DigestFields:
    """The names of one category's digest fields: how often, the day and the hour."""

    cadence: str
    weekday: str
    hour: str


def digest_fields(category: str) -> DigestFields:
    return DigestFields(
        f"digest-{category}", f"digest-{category}-weekday", f"digest-{category}-hour"
    )


def add_digest_fields(form: forms.BaseForm, *, chosen: preferences.Preferences) -> dict:
    """Add to form, for each category a recipient may take as a digest, how often it comes,
    the day (weekly) and the hour (daily and weekly), as chosen says; return {category:
    DigestFields}. The day and hour are always there and ignored where the choice does not
    use them, so the form works without JavaScript."""
    added = {}
    for category in preferences.digest_categories():
        digest = chosen.digest_for(category)
        names = digest_fields(category)
        form.fields[names.cadence] = forms.ChoiceField(
            label=_("How often"),
            choices=Cadence.choices,
            # Not sent: this category is left as it is.
            required=False,
            initial=digest.cadence if digest else Cadence.INSTANT,
            # As with the boxes, only what the reader changed is a choice (changed_digests).
            show_hidden_initial=True,
        )
        # Text, read by _number: preferences.check_digest says what is wrong with a day or an
        # hour, and only for the choices that use it.
        form.fields[names.weekday] = forms.CharField(
            label=_("Day (weekly only)"),
            required=False,
            initial=DIGEST_WEEKDAY_SHOWN
            if digest is None or digest.weekday is None
            else digest.weekday,
            widget=forms.Select(choices=list(WEEKDAYS.items())),
            show_hidden_initial=True,
        )
        form.fields[names.hour] = forms.CharField(
            label=_("Hour (daily and weekly only)"),
            required=False,
            initial=DIGEST_HOUR_SHOWN if digest is None or digest.hour is None else digest.hour,
            widget=forms.Select(choices=DIGEST_HOURS),
            show_hidden_initial=True,
        )
        added[category] = names
    return added


def _number(value):
    """A day or an hour as sent: None when empty, a number where it is one, else as it came
    (for preferences.check_digest to refuse in its words)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


# A page's hidden values that make no digest: whatever is sent now differs from them.
_UNREADABLE = object()


def _shown_digest(form: forms.BaseForm, category: str, names: DigestFields):
    """The digest the page showed for category when it was loaded (its hidden initial values,
    or, from a client that sends none, what is stored now), as it is stored."""
    values = []
    for name in (names.cadence, names.hour, names.weekday):
        field, shown = form.fields[name], form[name].html_initial_name
        try:
            values.append(
                field.to_python(form.data[shown]) if shown in form.data else field.initial
            )
        except ValidationError:
            return _UNREADABLE
    cadence, hour, weekday = values
    try:
        return preferences.check_digest(category, Digest(cadence, _number(hour), _number(weekday)))
    except ValidationError:
        return _UNREADABLE


def changed_digests(form: forms.BaseForm, added: Mapping[str, DigestFields]) -> dict:
    """After the form's own cleaning: category → Digest (None: as it happens) for each
    category whose choice the reader changed, each checked by preferences.check_digest, its
    refusal put on the field at fault. A choice left as the page showed it is not one, so a
    save from a page left open undoes nothing chosen since."""
    changed = {}
    for category, names in added.items():
        parts = {"cadence": names.cadence, "hour": names.hour, "weekday": names.weekday}
        if any(form.has_error(name) for name in parts.values()):
            continue
        data = form.cleaned_data
        if not data.get(names.cadence):
            continue  # not sent: left as it is
        digest = Digest(
            data[names.cadence], _number(data.get(names.hour)), _number(data.get(names.weekday))
        )
        try:
            digest = preferences.check_digest(category, digest)
        except ValidationError as exc:
            for part, messages in exc.message_dict.items():
                for message in messages:
                    form.add_error(parts.get(part), message)
            continue
        if digest != _shown_digest(form, category, names):
            changed[category] = digest
    return changed


def describe_digest(digest: Digest | None) -> str:
    """How often a category comes, in words: "as it happens", "daily digest at 09:00"."""
    if digest is None:
        return str(Cadence.INSTANT.label)
    hour = f"{digest.hour:02d}:00" if digest.hour is not None else ""
    if digest.cadence == Cadence.DAILY:
        return gettext("daily digest at %(hour)s") % {"hour": hour}
    if digest.cadence == Cadence.WEEKLY:
        return gettext("weekly digest on %(weekday)s at %(hour)s") % {
            "weekday": WEEKDAYS[digest.weekday],
            "hour": hour,
        }
    return str(Cadence(digest.cadence).label)


def check_quiet_hours(form: forms.BaseForm, *, start_field: str, end_field: str) -> None:
    """Add an error to form unless its quiet window is two different times, or none."""
    data = form.cleaned_data
    if form.has_error(start_field) or form.has_error(end_field):
        return
    start, end = data.get(start_field), data.get(end_field)
    # To the minute: "22:00:00.5" is 22:00, as the page's own inputs send it.
    start, end = (t.replace(second=0, microsecond=0) if t else t for t in (start, end))
    data[start_field], data[end_field] = start, end
    if (start is None) != (end is None):
        missing = end_field if end is None else start_field
        form.add_error(missing, _("Quiet hours need both a start and an end, or neither."))
    elif start is not None and start == end:
        form.add_error(end_field, _("Quiet hours must end at another time than they start."))


def clean_time_zone(value: str) -> str:
    return preferences.validate_time_zone((value or "").strip())


def give_webhook_secret(address: ChannelAddress) -> str | None:
    """Make the signing secret of a webhook address that has none, and return it (to be shown
    once); None when it has one. A webhook is only ever sent signed (WEBHOOK_NO_SECRET)."""
    channel = channels.get(address.channel)
    if channel is None or not channel.signed_with_secret:
        return None
    if WebhookSecret.objects.filter(address=address).exists():
        return None
    secret = signing.new_secret()
    WebhookSecret.objects.create(address=address, secret=secret)
    return secret


class ChannelAddressForm(forms.ModelForm):
    class Meta:
        model = ChannelAddress
        fields = ("user", "channel", "address", "is_active")

    channel = forms.ChoiceField(label=_("channel"))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The channels whose addresses are ChannelAddress rows: not email (the account's),
        # not the inbox (the account itself), not one that needs none.
        addressed = {
            name: channel
            for name, channel in channels.configured().items()
            if channel.address_source == AddressSource.CHANNEL_ADDRESS
        }
        self.fields["channel"].choices = [(n, c.shown_label) for n, c in addressed.items()]
        # What an address is on each of them, in the channels' own words (the model's help
        # names only the built-in ones). Not on a page that only shows the address.
        if "address" in self.fields:
            self.fields["address"].help_text = _("The address on each channel: %(kinds)s.") % {
                "kinds": "; ".join(
                    f"{c.shown_label} — {c.address_label or c.shown_label}"
                    for c in addressed.values()
                )
            }

    def clean(self):
        data = super().clean()
        channel, address = data.get("channel"), (data.get("address") or "").strip()
        kind = channels.get(channel) if channel else None
        if kind is not None and not kind.typed_address:
            if self.typed_subscription(channel=channel, address=address):
                self.add_error(
                    "address",
                    _(
                        "A push subscription is made by the browser that receives it, on the "
                        "preference centre: one can be switched off here, not typed in."
                    ),
                )
        elif kind is not None and address and not self.has_error("address"):
            # An empty or over-long address already has the field's own error. The channel
            # refuses what its sends would refuse (a bot's id pattern, the webhook's netguard).
            try:
                address = kind.clean_address(address)
            except ValidationError as exc:
                self.add_error("address", exc)
        data["address"] = address
        user, active = data.get("user"), data.get("is_active")
        # A user has a push subscription on each browser: only the other channels are one.
        one_only = kind is None or not kind.several_addresses
        if (
            user
            and channel
            and active
            and one_only
            and self.other_active(user=user, channel=channel)
        ):
            # Said here, in the staff member's words: the database's unique constraint would
            # otherwise surface as its name ("channel_addresses_one_active" is violated).
            self.one_active_refused = True
            self.add_error(
                "is_active",
                _(
                    "%(user)s already has an active %(channel)s address. Switch that one off "
                    "first, or save this one switched off."
                )
                % {"user": user, "channel": kind.shown_label if kind else channel},
            )
        return data

    one_active_refused = False

    def typed_subscription(self, *, channel: str, address: str) -> bool:
        """Whether this save would make a push address that no browser subscribed: a new one,
        or an existing one's endpoint or channel changed (its keys are the browser's)."""
        stored = self.instance
        return stored.pk is None or (stored.channel, stored.address) != (channel, address)

    def other_active(self, *, user, channel: str) -> bool:
        others = ChannelAddress.objects.filter(user=user, channel=channel, is_active=True)
        return others.exclude(pk=self.instance.pk).exists()

    def validate_constraints(self):
        if not self.one_active_refused:  # already said, in words (clean)
            super().validate_constraints()
