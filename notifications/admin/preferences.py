"""Recipients' settings in the staff console: a user's language, time zone and quiet hours,
with the grid of what each category reaches on each channel, held to the rules the preference
centre keeps (notifications/preferences.py: a known IANA zone, a required category left on
at least one channel, a quiet window of two different times or none).

The choices are stored per user (ChannelPreference points at the user, not at the Recipient
row), so they cannot be a Django inline of this admin; the change form carries them as a grid
of boxes instead, one per category and channel, which also shows the defaults no row stores.
The rules it shares with the site's own preference centre (accounts/) are in
notifications/forms.py.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext_lazy
from django.utils.translation import gettext_lazy as _

from notifications import preferences
from notifications.admin.wording import Worded
from notifications.forms import (
    add_choice_fields,
    changed_choices,
    channel_label,
    check_quiet_hours,
    choice_field_name,
    clean_time_zone,
)
from notifications.models import Recipient


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
                preferences.check(user, choices=self.choices())
            except ValidationError as exc:
                self.add_error(None, exc)
        return data

    def choices(self) -> dict[tuple[str, str], bool]:
        """The boxes staff changed, and only those: the others are whatever the user chose
        meanwhile (an unsubscribe link while the form was open), or, on the add form, the
        defaults shown for a user not chosen yet."""
        return changed_choices(self, self.grid)

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
        if obj is not None and not self.has_change_permission(request, obj):
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
            try:
                preferences.choose(form.instance.user, choices=form.choices())
            except ValidationError as exc:
                # clean() checked the same choices; only a save of the user's own in between
                # (the preference centre, an unsubscribe link) gets here.
                messages.error(request, " ".join(exc.messages))
