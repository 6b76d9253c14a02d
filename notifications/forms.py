"""Forms and form rules the staff console and the site's own pages share: the address of a
channel (checked as the drain would check it), the grid of what each category reaches on each
channel, the quiet window and the time zone. accounts/ (the preference centre) and
notifications/admin/ both build on them, so a rule is written once.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from notifications import preferences
from notifications.channels import netguard, signing
from notifications.channels.discord import _SNOWFLAKE
from notifications.channels.telegram import _CHAT_ID
from notifications.models import ChannelAddress, WebhookSecret

# What people call each channel; a channel not named here is shown by its name.
CHANNEL_LABELS = {
    "email": _("Email"),
    "telegram": _("Telegram"),
    "discord": _("Discord"),
    "webhook": _("Webhook"),
}


def channel_label(name: str) -> str:
    return str(CHANNEL_LABELS.get(name, name))


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
    if address.channel != "webhook" or WebhookSecret.objects.filter(address=address).exists():
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
        choices = [(n, n) for n in settings.DELIVERY_CHANNELS if n not in {"email", "demo"}]
        self.fields["channel"].choices = choices

    def clean(self):
        data = super().clean()
        channel, address = data.get("channel"), (data.get("address") or "").strip()
        if channel == "telegram" and not _CHAT_ID.fullmatch(address):
            self.add_error("address", _("A Telegram chat id is a number, or @ and a name."))
        elif channel == "discord" and not _SNOWFLAKE.fullmatch(address):
            self.add_error("address", _("A Discord user id is a number of up to 20 digits."))
        elif channel == "webhook" and address and not self.has_error("address"):
            # An empty or over-long address already has the field's own error.
            self.check_webhook(address)
        data["address"] = address
        user, active = data.get("user"), data.get("is_active")
        if user and channel and active and self.other_active(user=user, channel=channel):
            # Said here, in the staff member's words: the database's unique constraint would
            # otherwise surface as its name ("channel_addresses_one_active" is violated).
            self.one_active_refused = True
            self.add_error(
                "is_active",
                _(
                    "%(user)s already has an active %(channel)s address. Switch that one off "
                    "first, or save this one switched off."
                )
                % {"user": user, "channel": channel},
            )
        return data

    one_active_refused = False

    def other_active(self, *, user, channel: str) -> bool:
        others = ChannelAddress.objects.filter(user=user, channel=channel, is_active=True)
        return others.exclude(pk=self.instance.pk).exists()

    def check_webhook(self, url: str) -> None:
        """Refuse what the drain would refuse, for the same reasons: an http(s) URL whose host
        resolves to public addresses only (loopback too where the drain may reach it)."""
        try:
            destination = netguard.parse_url(url)
            netguard.resolve(
                destination.host,
                destination.port,
                allow_loopback=settings.DELIVERY_WEBHOOK_ALLOW_LOOPBACK,
            )
        except netguard.Refused as exc:
            self.add_error("address", exc.translated())
        except socket.gaierror:
            self.add_error(
                "address",
                _("%(host)s does not resolve: check the name.") % {"host": destination.host},
            )

    def validate_constraints(self):
        if not self.one_active_refused:  # already said, in words (clean)
            super().validate_constraints()
