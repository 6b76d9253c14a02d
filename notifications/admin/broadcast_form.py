"""The form staff send a broadcast with (notifications/admin/broadcasts.py, add_view).

Every field is checked here and refused in words, so that nothing a browser can post reaches
send_broadcast() unchecked: it checks them again, and its errors are English sentences for
programmers, not for the console.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

import transports
from notifications import inbox, lanes
from notifications.enqueue import CANCEL_KEY_MAX
from notifications.models import DEFAULT_LANE, Broadcast
from recipients import audiences, catalogue
from recipients.models import Audience

# The parameters' JSON, at most: a message's parameters are a few words each. The bound comes
# before the parse, so a huge or deeply nested post is refused without being read as JSON.
PARAMS_MAX_CHARS = 10_000
# The datetime-local input's format, which DateTimeField also reads.
SEND_AT_FORMAT = "%Y-%m-%dT%H:%M"


def broadcastable() -> dict[str, catalogue.Message]:
    """The messages staff may broadcast: those of a category recipients choose and may turn
    off. A required category's messages (a password reset) concern one person's access, and a
    secret parameter (a reset link) grants something to whoever reads it, so neither is ever
    sent to a crowd."""
    return {
        key: message
        for key, message in catalogue.MESSAGES.items()
        if message.category in catalogue.CATEGORIES
        and catalogue.CATEGORIES[message.category].choosable
        and not catalogue.CATEGORIES[message.category].required
        and not message.secret
    }


class AudienceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Audience) -> str:
        return f"{obj.name} ({obj.get_kind_display()})"


class SendBroadcastForm(forms.Form):
    audience = AudienceField(
        label=capfirst(_("audience")), queryset=Audience.objects.order_by("name")
    )
    type = forms.ChoiceField(label=capfirst(_("message")))
    params = forms.CharField(
        label=capfirst(_("parameters")),
        required=False,
        max_length=PARAMS_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
        help_text=_(
            "The message's parameters as a JSON object, each value as text in quotes: "
            '{"name": "Ada"}. The parameters each message takes are listed beside it.'
        ),
    )
    channels = forms.MultipleChoiceField(
        label=capfirst(_("channels")),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("None ticked: each recipient's own channels."),
    )
    priority = forms.ChoiceField(label=capfirst(_("lane")), initial=DEFAULT_LANE)
    send_at = forms.DateTimeField(
        label=capfirst(_("send at")),
        required=False,
        input_formats=[SEND_AT_FORMAT],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=SEND_AT_FORMAT),
    )
    cancel_key = forms.CharField(
        label=capfirst(_("cancel key")),
        required=False,
        max_length=CANCEL_KEY_MAX,
        help_text=_("Optional: a name code can cancel the broadcast's notifications by."),
    )
    action_url = forms.CharField(
        label=capfirst(_("link")),
        required=False,
        max_length=Broadcast._meta.get_field("action_url").max_length,
        help_text=_("Optional: an address on this site (starting with /) or an http(s) one."),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages = broadcastable()
        self.fields["type"].choices = [
            (key, self.message_label(key, message)) for key, message in self.messages.items()
        ]
        self.fields["channels"].choices = [
            (name, channel.shown_label)
            for name, channel in transports.configured().items()
            if channel.choosable
        ]
        self.fields["priority"].choices = [(name, name) for name in lanes.names()]
        zone = timezone.get_default_timezone_name()
        self.fields["send_at"].help_text = gettext(
            "Optional: when to send, in %(zone)s (the site's time zone). Empty, or a time "
            "already past: now."
        ) % {"zone": zone}

    @staticmethod
    def message_label(key: str, message: catalogue.Message) -> str:
        category = catalogue.CATEGORIES[message.category].label
        taken = ", ".join(sorted(message.params)) or gettext("no parameters")
        return f"{category}: {key} — {message.subject} ({taken})"

    def full_clean(self):
        # A time is read in the site's time zone, whichever zone the staff member reads in.
        with timezone.override(timezone.get_default_timezone()):
            super().full_clean()

    def clean_audience(self) -> Audience:
        audience = self.cleaned_data["audience"]
        try:
            audiences.members(audience)
        except LookupError:
            raise forms.ValidationError(
                gettext(
                    "%(audience)s reads the users registered in code as %(name)s, and nothing "
                    "is registered under that name now."
                )
                % {"audience": audience.name, "name": audience.registered_name}
            ) from None
        return audience

    def clean_params(self) -> dict[str, str]:
        text = self.cleaned_data["params"].strip()
        if not text:
            return {}
        try:
            params = json.loads(text)
        except (ValueError, RecursionError):
            raise forms.ValidationError(
                gettext('This is not JSON. Write an object, such as {"name": "Ada"}.')
            ) from None
        if not isinstance(params, dict):
            raise forms.ValidationError(
                gettext('Write the parameters as a JSON object, such as {"name": "Ada"}.')
            )
        for name, value in params.items():
            if not isinstance(value, str):
                raise forms.ValidationError(
                    gettext('The value of %(name)s must be text, in quotes: "…".') % {"name": name}
                )
            for part in (name, value):
                # PostgreSQL's jsonb refuses a NUL, and a lone surrogate is not UTF-8.
                if "\x00" in part or not _encodes(part):
                    raise forms.ValidationError(
                        gettext("The parameter %(name)s holds a character that cannot be sent.")
                        % {"name": json.dumps(name)}
                    )
        return params

    def clean_action_url(self) -> str:
        url = self.cleaned_data["action_url"]
        if url and inbox.safe_link(url) != url:
            raise forms.ValidationError(
                gettext(
                    "The link must be an address on this site (starting with /) or an "
                    "http(s) address, without spaces."
                )
            )
        return url

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        key, params = cleaned.get("type"), cleaned.get("params")
        if key is None or params is None:
            return cleaned
        taken = self.messages[key].params
        missing = sorted(taken - set(params))
        unknown = sorted(set(params) - taken)
        if missing:
            self.add_error(
                "params",
                ngettext(
                    "The message %(message)s needs the parameter %(names)s.",
                    "The message %(message)s needs the parameters %(names)s.",
                    len(missing),
                )
                % {"message": key, "names": ", ".join(missing)},
            )
        if unknown:
            self.add_error(
                "params",
                ngettext(
                    "The message %(message)s takes no parameter %(names)s.",
                    "The message %(message)s takes no parameters %(names)s.",
                    len(unknown),
                )
                % {"message": key, "names": ", ".join(unknown)},
            )
        if not missing and not unknown:
            try:
                catalogue.validate(key=key, params=params)
            except ValueError as exc:
                self.add_error("params", str(exc))
        return cleaned

    def arguments(self) -> dict[str, Any]:
        """send_broadcast()'s keyword arguments, from a valid form."""
        data = self.cleaned_data
        return {
            "audience": data["audience"],
            "type": data["type"],
            "params": data["params"],
            "channels": data["channels"] or None,
            "priority": data["priority"],
            "send_at": data["send_at"],
            "cancel_key": data["cancel_key"],
            "action_url": data["action_url"],
        }


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
