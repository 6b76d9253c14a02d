"""Where users receive the channels other than email: their Telegram chats, Discord users and
webhook endpoints, which staff can see, correct and switch back on, with each webhook's
signing secrets (masked; rotated with the previous one still valid)."""

from __future__ import annotations

import socket

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext, gettext_noop, ngettext_lazy
from django.utils.translation import gettext_lazy as _

from notifications import channels
from notifications.admin.wording import Worded
from notifications.channels import netguard, signing
from notifications.channels.base import ChannelError
from notifications.channels.discord import _SNOWFLAKE
from notifications.channels.telegram import _CHAT_ID
from notifications.models import ChannelAddress, DatabaseNow, WebhookSecret

# Stored as a message id, translated when the history is read (object_history.html).
ROTATED = gettext_noop("Rotated the webhook secret.")


def masked(secret: str) -> str:
    """Enough of a secret to tell two apart, never enough to use: whsec_…1a2b."""
    return f"{signing.PREFIX}…{secret[-4:]}" if secret else "—"


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


class WebhookSecretInline(admin.StackedInline):
    model = WebhookSecret
    fields = ("current", "previous", "rotated_at")
    readonly_fields = fields
    can_delete = False
    extra = 0
    max_num = 0  # made and rotated by the actions, never typed in

    @admin.display(description=_("secret"))
    def current(self, obj):
        return masked(obj.secret)

    @admin.display(description=_("previous secret"))
    def previous(self, obj):
        return masked(obj.previous_secret)


@admin.register(ChannelAddress)
class ChannelAddressAdmin(Worded, admin.ModelAdmin):
    list_title = _("Select a channel address to view")
    view_title = _("View channel address")
    change_list_title = _("Select a channel address to change")
    change_title = _("Change channel address")
    add_title = _("Add channel address")
    search_title = _("Search channel addresses")
    counted = ngettext_lazy("%(number)s channel address", "%(number)s channel addresses", "count")
    select_all = _("Select all %(number)s channel addresses")
    form = ChannelAddressForm
    list_display = ("user", "channel", "address", "state", "deactivated_at", "deactivated_reason")
    list_filter = ("channel", "is_active")
    search_fields = ("user__username", "user__email", "address")
    readonly_fields = ("created_at", "deactivated_at", "deactivated_reason")
    list_select_related = ("user",)
    inlines = [WebhookSecretInline]
    actions = ["rotate_webhook_secret", "drop_previous_webhook_secret"]

    def get_urls(self):
        probe = path(
            "probe/<str:name>/",
            self.admin_site.admin_view(self.probe_view),
            name="notifications_channel_probe",
        )
        return [probe, *super().get_urls()]

    def probe_view(self, request, name: str):
        """Ask a channel's provider who we are (Telegram's getMe, Discord's users/@me), and
        say how long the round trip took: the dashboard's "Probe" button."""
        if request.method != "POST":
            raise Http404
        if not self.has_view_permission(request):
            raise PermissionDenied
        channel = channels.get(name) if name in settings.DELIVERY_CHANNELS else None
        if channel is None or not hasattr(channel, "probe"):
            raise Http404
        try:
            answer = channel.probe()
        except ChannelError as exc:
            self.message_user(
                request,
                gettext("%(channel)s: the probe failed: %(code)s, %(message)s")
                % {"channel": name, "code": exc.code, "message": exc.message},
                messages.ERROR,
            )
        else:
            self.message_user(
                request,
                gettext("%(channel)s: %(name)s answered in %(ms)s ms.")
                % {"channel": name, "name": answer.name, "ms": round(answer.seconds * 1000)},
                messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:index"))

    def has_add_permission(self, request, obj=None):
        return admin.ModelAdmin.has_add_permission(self, request)

    def has_change_permission(self, request, obj=None):
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    @admin.display(description=_("active"), boolean=False)
    def state(self, obj):
        if obj.is_active:
            return format_html('<span class="health health-healthy">{}</span>', gettext("active"))
        return format_html(
            '<span class="health health-unhealthy">{}</span>', gettext("deactivated")
        )

    def save_model(self, request, obj, form, change):
        # Switched back on by staff: what switched it off is history, kept in the log.
        if obj.is_active and obj.deactivated_at:
            obj.deactivated_at, obj.deactivated_reason = None, ""
        super().save_model(request, obj, form, change)
        # A webhook is only ever sent signed: without a secret every delivery would fail
        # WEBHOOK_NO_SECRET. One is made with the address (or when it becomes a webhook).
        if obj.channel == "webhook" and not WebhookSecret.objects.filter(address=obj).exists():
            secret = signing.new_secret()
            WebhookSecret.objects.create(address=obj, secret=secret)
            self.show_new_secret(request, address=obj, secret=secret)

    def show_new_secret(self, request, *, address: ChannelAddress, secret: str) -> None:
        # Shown once, here: the receiver needs it, and the page never shows it again.
        self.message_user(
            request,
            format_html(
                "{} <code>{}</code>",
                gettext("New secret for %(address)s, shown only now:")
                % {"address": address.address},
                secret,
            ),
            messages.SUCCESS,
        )

    # Both change what a receiver must hold, and the rotation shows the new secret: only for
    # staff who may change addresses, never for those who may only look.
    @admin.action(
        permissions=["change"],
        description=_("Rotate the webhook secret (the old one stays valid)"),
    )
    def rotate_webhook_secret(self, request, queryset):
        for address in queryset.filter(channel="webhook"):
            new = signing.new_secret()
            row, made = WebhookSecret.objects.get_or_create(
                address=address, defaults={"secret": new}
            )
            if not made:
                WebhookSecret.objects.filter(pk=row.pk).update(
                    previous_secret=row.secret, secret=new, rotated_at=DatabaseNow()
                )
            self.log_change(request, address, ROTATED)
            self.show_new_secret(request, address=address, secret=new)

    @admin.action(permissions=["change"], description=_("Drop the previous webhook secret"))
    def drop_previous_webhook_secret(self, request, queryset):
        dropped = WebhookSecret.objects.filter(
            address__in=queryset.filter(channel="webhook")
        ).exclude(previous_secret="")
        count = dropped.update(previous_secret="")
        self.message_user(
            request,
            gettext("Previous secrets dropped: %(count)d.") % {"count": count},
            messages.SUCCESS,
        )
