"""Recipients' settings in the staff console: a user's language, time zone and quiet hours,
with the grid of what each category reaches on each channel and how often each comes (as it
happens, or a digest), held to the rules the preference centre keeps
(recipients/preferences.py: a known IANA zone, a required category left on at least one
channel and never in a digest, a digest with the hour and day it needs, a quiet window of two
different times or none).

The choices are stored per user (ChannelPreference and DigestChoice point at the user, not at
the Recipient row), so they cannot be Django inlines of this admin; the change form carries
them as its own fields instead, a box per category and channel and a digest per category,
which also show the defaults no row stores.
The rules it shares with the site's own preference centre (accounts/) are in
recipients/forms.py.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html, format_html_join
from django.utils.text import format_lazy
from django.utils.translation import gettext, ngettext_lazy
from django.utils.translation import gettext_lazy as _

from core.admin_wording import Worded
from recipients import preferences
from recipients.forms import (
    add_choice_fields,
    add_digest_fields,
    changed_choices,
    changed_digests,
    channel_label,
    check_quiet_hours,
    choice_field_name,
    clean_time_zone,
    describe_digest,
    digest_fields,
)
from recipients.models import Recipient

ALWAYS_AT_ONCE = _("Always sent at once, never in a digest.")
ON_THEIR_CLOCK = _("A digest's hour is on the recipient's clock, in their time zone.")


class RecipientForm(forms.ModelForm):
    class Meta:
        model = Recipient
        fields = ("user", "language", "time_zone", "quiet_start", "quiet_end", "quiet_email")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        user = self.instance.user if self.instance.pk else None
        chosen = preferences.of(user) if user else preferences.Preferences()
        self.grid = add_choice_fields(self, chosen=chosen)
        self.digest_fields = add_digest_fields(self, chosen=chosen)

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
        # Checked by the rules the preference centre's digests keep, errors by their fields.
        self.digest_changes = changed_digests(self, self.digest_fields)
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
            # Read-only, the grid and the digests are shown in words (read-only fields must be
            # attributes).
            return [
                settings_fieldset,
                (_("What reaches them"), {"fields": ("channel_choices", "digest_choices")}),
            ]
        return [
            settings_fieldset,
            *(
                (category.label, self.category_fieldset(name, category))
                for name, category in preferences.choosable_categories().items()
            ),
        ]

    @staticmethod
    def category_fieldset(name: str, category) -> dict:
        """A category's boxes, one per channel, and below them how often it comes."""
        boxes = tuple(choice_field_name(name, ch) for ch in preferences.choosable_channels())
        if category.required:
            return {
                "fields": [boxes],
                "description": format_lazy("{} {}", category.description, ALWAYS_AT_ONCE),
            }
        digest = digest_fields(name)
        return {
            "fields": [boxes, (digest.cadence, digest.weekday, digest.hour)],
            "description": format_lazy("{} {}", category.description, ON_THEIR_CLOCK),
        }

    @admin.display(description=_("quiet hours"))
    def quiet_hours(self, obj):
        if obj.quiet_start is None:
            return "—"
        return f"{obj.quiet_start:%H:%M}–{obj.quiet_end:%H:%M}"

    @admin.display(description=_("channels"))
    def channel_choices(self, obj):
        chosen = chosen_by(obj)
        channels = preferences.choosable_channels()

        def switches(name, category):
            return ", ".join(
                f"{channel_label(ch)} "
                + (gettext("on") if chosen.enabled(name, ch) else gettext("off"))
                for ch in channels
            )

        return categories_listed(switches)

    @admin.display(description=_("how often"))
    def digest_choices(self, obj):
        chosen = chosen_by(obj)

        def how_often(name, category):
            if category.required:
                return ALWAYS_AT_ONCE
            return describe_digest(chosen.digest_for(name))

        return categories_listed(how_often)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        if hasattr(form, "grid"):
            try:
                preferences.choose(form.instance.user, choices=form.choices())
            except ValidationError as exc:
                # clean() checked the same choices; only a save of the user's own in between
                # (the preference centre, an unsubscribe link) gets here.
                messages.error(request, " ".join(exc.messages))
        if hasattr(form, "digest_changes"):
            # clean() checked them with the same rules; nothing between can make them wrong.
            preferences.choose_digests(form.instance.user, digests=form.digest_changes)


def chosen_by(recipient) -> preferences.Preferences:
    """What the recipient's user chose, or the defaults on the add form (no user yet)."""
    chosen = preferences.of(recipient.user_id) if recipient is not None and recipient.pk else None
    return chosen or preferences.Preferences()


def categories_listed(describe) -> str:
    """Each category a user may choose for, with what describe(name, category) says of it."""
    return format_html(
        "<ul>{}</ul>",
        format_html_join(
            "",
            "<li>{}: {}</li>",
            (
                (category.label, describe(name, category))
                for name, category in preferences.choosable_categories().items()
            ),
        ),
    )
