"""The preference centre's forms, one per section of the page: what each category reaches on
which channel, how often each comes (as it happens or a digest), the time zone and quiet hours,
and where the channels other than email reach the user. Each checks what the staff console
checks, with the same code (recipients/admin/preferences.py, recipients/admin/addresses.py),
and saves through recipients.preferences."""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

import transports as channels
from recipients import forms as rules
from recipients import preferences
from recipients.forms import ChannelAddressForm
from recipients.models import ChannelAddress, Recipient
from transports.base import QuietHours


@dataclass(frozen=True)
class Cell:
    channel: str
    label: str
    field: forms.BoundField
    # The only channel a required category is on: turning it off is refused.
    last_on: bool


@dataclass(frozen=True)
class CategoryRow:
    """A category's line in a section of the page: its name, words and whether it is required."""

    name: str
    label: str
    description: str
    required: bool

    @classmethod
    def of(cls, name: str, category, **fields):
        return cls(
            name=name,
            label=str(category.label),
            description=str(category.description),
            required=category.required,
            **fields,
        )


@dataclass(frozen=True)
class Row(CategoryRow):
    cells: list[Cell]


class ChannelChoicesForm(forms.Form):
    """A box per category and channel: checked, that category reaches the user there."""

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.stored = preferences.of(user)
        self.grid = rules.add_choice_fields(self, chosen=self.stored)
        for name, (category, _channel) in self.grid.items():
            if preferences.choosable_categories()[category].required:
                # The row's note says why its last box cannot be unticked.
                self.fields[name].widget.attrs["aria-describedby"] = f"required-{category}"

    def channels(self) -> list[tuple[str, str]]:
        return [(name, rules.channel_label(name)) for name in preferences.choosable_channels()]

    def rows(self) -> list[Row]:
        channels = preferences.choosable_channels()
        rows = []
        for name, category in preferences.choosable_categories().items():
            on = [ch for ch in channels if self.stored.enabled(name, ch)]
            cells = [
                Cell(
                    channel=channel,
                    label=rules.channel_label(channel),
                    field=self[rules.choice_field_name(name, channel)],
                    last_on=category.required and on == [channel],
                )
                for channel in channels
            ]
            rows.append(Row.of(name, category, cells=cells))
        return rows

    def save(self) -> bool:
        """Store the choices; False, with the refusal among the form's errors, when
        preferences.choose refuses them (a required category left on no channel)."""
        # The boxes changed on this page only: one left as it was is whatever the user chose
        # since it was loaded (an unsubscribe link in another tab), which must stand.
        choices = rules.changed_choices(self, self.grid)
        try:
            preferences.choose(self.user, choices=choices)
        except ValidationError as exc:
            self.add_error(None, exc)
            return False
        self.stored = preferences.of(self.user)
        return True


@dataclass(frozen=True)
class DigestRow(CategoryRow):
    # A required category (required=True) has no fields: it is always sent at once.
    cadence: forms.BoundField | None = None
    weekday: forms.BoundField | None = None
    hour: forms.BoundField | None = None


class DigestChoicesForm(forms.Form):
    """How often each category reaches the user: as it happens, or gathered into an hourly,
    daily or weekly digest at an hour on their own clock."""

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.stored = preferences.of(user)
        self.digest_fields = rules.add_digest_fields(self, chosen=self.stored)
        for category, names in self.digest_fields.items():
            self.fields[names.cadence].widget.attrs["data-digest-cadence"] = ""
            # The note under the fields says which choice uses the day and the hour.
            for name in (names.weekday, names.hour):
                self.fields[name].widget.attrs["aria-describedby"] = f"digest-note-{category}"

    @property
    def time_zone(self) -> str:
        """The zone the hours are on: the user's saved one (UTC until they save one)."""
        return self.stored.time_zone

    def rows(self) -> list[DigestRow]:
        rows = []
        for name, category in preferences.choosable_categories().items():
            names = self.digest_fields.get(name)
            fields = (
                {
                    "cadence": self[names.cadence],
                    "weekday": self[names.weekday],
                    "hour": self[names.hour],
                }
                if names
                else {}
            )
            rows.append(DigestRow.of(name, category, **fields))
        return rows

    def clean(self):
        data = super().clean()
        self.changes = rules.changed_digests(self, self.digest_fields)
        return data

    def save(self) -> bool:
        """Store the digests changed on this page; False, with the refusal among the form's
        errors, when preferences.choose_digests refuses them."""
        try:
            preferences.choose_digests(self.user, digests=self.changes)
        except ValidationError as exc:
            self.add_error(None, exc)
            return False
        self.stored = preferences.of(self.user)
        return True


class QuietHoursForm(forms.Form):
    """The user's time zone and daily quiet window (Recipient)."""

    time_zone = forms.CharField(
        label=gettext_lazy("Time zone"),
        max_length=preferences.TIME_ZONE_MAX,
        help_text=gettext_lazy("A name such as Europe/Berlin or America/New_York."),
        widget=forms.TextInput(
            attrs={"list": "time-zones", "autocomplete": "off", "spellcheck": "false"}
        ),
    )
    quiet_start = forms.TimeField(
        label=gettext_lazy("Quiet from"),
        required=False,
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    quiet_end = forms.TimeField(
        label=gettext_lazy("Quiet until"),
        required=False,
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    # Holds the channels that wait to be read (QuietHours.WHEN_ASKED: email), named in its
    # label; a site that runs none has no such box.
    quiet_email = forms.BooleanField(required=False)

    def __init__(self, *args, user, **kwargs):
        self.user = user
        self.recipient = Recipient.objects.filter(user=user).first()
        stored = self.recipient or Recipient()
        initial = {
            "time_zone": stored.time_zone,
            "quiet_start": stored.quiet_start,
            "quiet_end": stored.quiet_end,
            "quiet_email": stored.quiet_email,
        }
        super().__init__(*args, initial=initial, **kwargs)
        if asked := self.when_asked():
            self.fields["quiet_email"].label = _(
                "Hold messages by %(channels)s during quiet hours too"
            ) % {"channels": ", ".join(asked)}
        else:
            del self.fields["quiet_email"]
        # Nothing chosen yet (no row, or the default zone): the page offers the browser's
        # (accounts/static/accounts/time-zone.js); nothing is stored until the user saves.
        if not self.is_bound and stored.time_zone == "UTC":
            self.fields["time_zone"].widget.attrs["data-prefill-time-zone"] = ""

    @staticmethod
    def interrupting() -> list[str]:
        """The channels quiet hours always hold, as the page names them."""
        return [
            channel.shown_label
            for name in preferences.choosable_channels()
            if (channel := channels.get(name)).quiet_hours == QuietHours.ALWAYS
        ]

    @staticmethod
    def when_asked() -> list[str]:
        """The channels quiet hours hold when the recipient ticks the box, as a sentence
        names them."""
        return [
            channel.shown_in_sentence
            for name in preferences.choosable_channels()
            if (channel := channels.get(name)).quiet_hours == QuietHours.WHEN_ASKED
        ]

    def clean_time_zone(self):
        return rules.clean_time_zone(self.cleaned_data["time_zone"])

    def clean(self):
        data = super().clean()
        rules.check_quiet_hours(self, start_field="quiet_start", end_field="quiet_end")
        return data

    def save(self) -> bool:
        data = self.cleaned_data
        fields = {
            "time_zone": data["time_zone"],
            "quiet_start": data["quiet_start"],
            "quiet_end": data["quiet_end"],
            "quiet_email": data.get("quiet_email", self.initial["quiet_email"]),
        }
        self.recipient, _made = Recipient.objects.update_or_create(
            user=self.user,
            defaults=fields,
            # A new row's language is the page's, as the password reset gives it.
            create_defaults={**fields, "language": translation.get_language() or "en"},
        )
        return True


ADDRESS_MAX = ChannelAddress._meta.get_field("address").max_length


def address_field_name(channel: str) -> str:
    return f"address-{channel}"


class ChannelAddressesForm(forms.Form):
    """Where each channel other than email reaches the user: one address a channel. Emptied,
    the address is removed; each one is checked by the staff console's own form."""

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.new_secrets: list[tuple[str, str]] = []
        self.active: dict[str, ChannelAddress] = {}
        self.switched_off: dict[str, ChannelAddress] = {}
        rows = ChannelAddress.objects.filter(user=user).order_by("created_at", "pk")
        for row in rows:
            if row.is_active:
                self.active[row.channel] = row
            else:
                self.switched_off[row.channel] = row
        for channel in self.channels():
            kind = channels.get(channel)
            active = self.active.get(channel)
            attrs = {"autocomplete": "off", "spellcheck": "false"}
            if kind.address_input_mode:
                attrs["inputmode"] = kind.address_input_mode
            self.fields[address_field_name(channel)] = forms.CharField(
                # A channel's own words for its address, or what it is called.
                label=kind.address_label or kind.shown_label,
                help_text=kind.address_help,
                required=False,
                max_length=ADDRESS_MAX,
                initial=active.address if active else "",
                widget=forms.TextInput(attrs=attrs),
            )

    @staticmethod
    def channels() -> list[str]:
        return preferences.typed_address_channels()

    def notes(self) -> dict[str, ChannelAddress]:
        """The switched-off address of each channel that has no active one."""
        return {ch: row for ch, row in self.switched_off.items() if ch not in self.active}

    def clean(self):
        data = super().clean()
        self.checked: dict[str, ChannelAddressForm] = {}
        for channel in self.channels():
            name = address_field_name(channel)
            if self.has_error(name):
                continue
            address = data.get(name, "")
            active = self.active.get(channel)
            if not address or (active and active.address == address):
                continue
            # A switched-off address typed again is switched back on (its webhook keeps its
            # secret); a changed one is the active row's new address; else a new row.
            again = self.switched_off.get(channel)
            instance = active or (again if again and again.address == address else None)
            checked = ChannelAddressForm(
                data={
                    "user": self.user.pk,
                    "channel": channel,
                    "address": address,
                    "is_active": "on",
                },
                instance=instance,
            )
            if checked.is_valid():
                self.checked[channel] = checked
            else:
                for errors in checked.errors.values():
                    for error in errors:
                        self.add_error(name, error)
        return data

    def save(self) -> bool:
        try:
            with transaction.atomic():
                # One save of a user's addresses at a time: the check of one active address
                # a channel and the write cannot interleave with another tab's.
                type(self.user)._default_manager.select_for_update().filter(
                    pk=self.user.pk
                ).exists()
                for channel in self.channels():
                    active = self.active.get(channel)
                    if active and not self.cleaned_data.get(address_field_name(channel)):
                        active.delete()
                        del self.active[channel]
                for channel, checked in self.checked.items():
                    row = checked.save(commit=False)
                    row.deactivated_at, row.deactivated_reason = None, ""
                    row.save()
                    self.active[channel] = row
                    self.switched_off.pop(channel, None)
                    secret = rules.give_webhook_secret(row)
                    if secret:
                        self.new_secrets.append((row.address, secret))
        except IntegrityError:
            # Another save of this user's addresses won the race; nothing of this one stayed.
            self.add_error(
                None, _("Your addresses were changed meanwhile. Check them and save again.")
            )
            return False
        return True
