"""Recipients' settings in the staff console: a user's language, time zone and quiet hours,
with the grid of what each category reaches on each channel, held to the rules the preference
centre keeps (notifications/preferences.py: a known IANA zone, a required category left on
at least one channel, a quiet window of two different times or none).

The choices are stored per user (ChannelPreference points at the user, not at the Recipient
row), so they cannot be a Django inline of this admin; the change form carries them as a grid
of boxes instead, one per category and channel, which also shows the defaults no row stores.
The helpers here are shared with the site's own preference centre (accounts/).
"""

from __future__ import annotations

from collections.abc import Mapping

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext_lazy
from django.utils.translation import gettext_lazy as _

from notifications import preferences
from notifications.admin.wording import Worded
from notifications.channels import signing
from notifications.models import ChannelAddress, Recipient, WebhookSecret

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
            )
            grid[name] = (category, channel)
    return grid


def check_quiet_hours(form: forms.BaseForm, *, start_field: str, end_field: str) -> None:
    """Add an error to form unless its quiet window is two different times, or none."""
    data = form.cleaned_data
    if form.has_error(start_field) or form.has_error(end_field):
        return
    start, end = data.get(start_field), data.get(end_field)
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


class _DryRun(Exception):
    pass


def check_choices(user, *, choices: Mapping[tuple[str, str], bool]) -> None:
    """Raise preferences.choose's ValidationError if it would refuse choices, storing nothing
    (for a form that must say so before anything is saved)."""
    try:
        with transaction.atomic():
            preferences.choose(user, choices=choices)
            raise _DryRun
    except _DryRun:
        pass


class RecipientForm(forms.ModelForm):
    class Meta:
        model = Recipient
        fields = ("user", "language", "time_zone", "quiet_start", "quiet_end", "quiet_email")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        user = self.instance.user if self.instance.pk else None
        chosen = preferences.of(user) if user else preferences.Preferences()
        self.grid = add_choice_fields(self, chosen=chosen)

    def clean_time_zone(self):
        return clean_time_zone(self.cleaned_data.get("time_zone"))

    def clean(self):
        data = super().clean()
        check_quiet_hours(self, start_field="quiet_start", end_field="quiet_end")
        user = self.instance.user if self.instance.pk else data.get("user")
        if user is not None:
            try:
                check_choices(user, choices=self.choices())
            except ValidationError as exc:
                self.add_error(None, exc)
        return data

    def choices(self) -> dict[tuple[str, str], bool]:
        return {pair: bool(self.cleaned_data.get(name)) for name, pair in self.grid.items()}

    def validate_constraints(self):
        # The quiet window's CHECK is said in words by clean(), not by the constraint's name.
        if not self.has_error("quiet_start") and not self.has_error("quiet_end"):
            super().validate_constraints()


@admin.register(Recipient)
class RecipientAdmin(Worded, admin.ModelAdmin):
    list_title = _("Select a recipient to view")
    view_title = _("View recipient settings")
    change_list_title = _("Select a recipient to change")
    change_title = _("Change recipient settings")
    add_title = _("Add recipient settings")
    search_title = _("Search recipients")
    counted = ngettext_lazy("%(number)s recipient", "%(number)s recipients", "count")
    select_all = _("Select all %(number)s recipients")
    form = RecipientForm
    list_display = ("user", "language", "time_zone", "quiet_hours", "quiet_email")
    list_filter = ("language", "quiet_email")
    search_fields = ("user__username", "user__email", "time_zone")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    MODEL_FIELDS = RecipientForm.Meta.fields

    def get_readonly_fields(self, request, obj=None):
        # The user is the row's key: another user is another row.
        return ("user",) if obj is not None else ()

    def get_form(self, request, obj=None, change=False, **kwargs):
        # The grid's boxes are the form's own (added per request), not model fields.
        kwargs["fields"] = [f for f in self.MODEL_FIELDS if f not in kwargs.get("exclude", ())]
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        settings_fieldset = (
            None,
            {
                "fields": (
                    "user",
                    "language",
                    "time_zone",
                    ("quiet_start", "quiet_end"),
                    "quiet_email",
                )
            },
        )
        if not self.has_change_permission(request, obj):
            # Read-only, the grid is shown in words (read-only fields must be attributes).
            return [settings_fieldset, (_("What reaches them"), {"fields": ("channel_choices",)})]
        return [
            settings_fieldset,
            *(
                (
                    category.label,
                    {
                        "fields": [
                            tuple(
                                choice_field_name(name, channel)
                                for channel in preferences.choosable_channels()
                            )
                        ],
                        "description": category.description,
                    },
                )
                for name, category in preferences.choosable_categories().items()
            ),
        ]

    @admin.display(description=_("quiet hours"))
    def quiet_hours(self, obj):
        if obj.quiet_start is None:
            return "—"
        return f"{obj.quiet_start:%H:%M}–{obj.quiet_end:%H:%M}"

    @admin.display(description=_("channels"))
    def channel_choices(self, obj):
        chosen = preferences.of(obj.user_id) if obj is not None and obj.pk else None
        chosen = chosen or preferences.Preferences()
        channels = preferences.choosable_channels()
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{}: {}</li>",
                (
                    (
                        category.label,
                        ", ".join(
                            f"{channel_label(ch)} "
                            + (gettext("on") if chosen.enabled(name, ch) else gettext("off"))
                            for ch in channels
                        ),
                    )
                    for name, category in preferences.choosable_categories().items()
                ),
            ),
        )

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        if hasattr(form, "grid"):
            preferences.choose(form.instance.user, choices=form.choices())
