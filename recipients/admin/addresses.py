"""Where users receive the channels other than email: their Telegram chats, Discord users and
webhook endpoints, which staff can see, correct and switch back on, with each webhook's
signing secrets (masked; rotated with the previous one still valid)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext, gettext_noop, ngettext_lazy
from django.utils.translation import gettext_lazy as _

import transports as channels
from core.admin_wording import Worded
from core.database import DatabaseNow
from recipients import deactivation
from recipients.forms import ChannelAddressForm, give_webhook_secret
from recipients.models import ChannelAddress, WebhookSecret
from transports import signing
from transports.base import ChannelError

# Stored as a message id, translated when the history is read (object_history.html).
ROTATED = gettext_noop("Rotated the webhook secret.")


def signed_channels() -> list[str]:
    """The configured channels whose addresses have signing secrets (Channel.signed_with_secret)."""
    return [name for name, c in channels.configured().items() if c.signed_with_secret]


def masked(secret: str) -> str:
    """Enough of a secret to tell two apart, never enough to use: whsec_…1a2b."""
    return f"{signing.PREFIX}…{secret[-4:]}" if secret else "—"


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
    list_display = ("user", "channel", "address", "state", "deactivated_at", "why")
    list_filter = ("channel", "is_active")
    search_fields = ("user__username", "user__email", "address")
    # Whether it is switched off, and why, each in a field of its own and in the reader's
    # language; the provider's own words beside them.
    fields = (
        "user",
        "channel",
        "address",
        "is_active",
        "state",
        "why",
        "detail",
        "deactivated_at",
        "created_at",
    )
    readonly_fields = ("state", "why", "detail", "created_at", "deactivated_at")
    list_select_related = ("user",)
    inlines = [WebhookSecretInline]
    actions = ["rotate_webhook_secret", "drop_previous_webhook_secret"]

    def get_urls(self):
        probe = path(
            "probe/<str:name>/",
            self.admin_site.admin_view(self.probe_view),
            name="recipients_channel_probe",
        )
        return [probe, *super().get_urls()]

    def probe_view(self, request, name: str):
        """Ask a channel's provider who we are (Telegram's getMe, Discord's users/@me), and
        say how long the round trip took: the dashboard's "Probe" button."""
        if request.method != "POST":
            raise Http404
        if not self.has_probe_permission(request):
            raise PermissionDenied
        channel = channels.get(name) if name in settings.DELIVERY_CHANNELS else None
        if channel is None or not channel.probes:
            raise Http404
        try:
            answer = channel.probe()
        except ChannelError as exc:
            self.message_user(
                request,
                gettext("%(channel)s: the probe failed: %(code)s, %(message)s")
                % {"channel": channel.shown_label, "code": exc.code, "message": exc.message},
                messages.ERROR,
            )
        else:
            self.message_user(
                request,
                gettext("%(channel)s: %(name)s answered in %(ms)s ms.")
                % {
                    "channel": channel.shown_label,
                    "name": answer.name,
                    "ms": round(answer.seconds * 1000),
                },
                messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:index"))

    def has_probe_permission(self, request) -> bool:
        return request.user.has_perm("recipients.probe_channel")

    def has_add_permission(self, request, obj=None):
        return admin.ModelAdmin.has_add_permission(self, request)

    def has_change_permission(self, request, obj=None):
        return admin.ModelAdmin.has_change_permission(self, request, obj)

    @admin.display(description=_("state"), ordering="is_active")
    def state(self, obj):
        if obj.pk is None:  # the add form: nothing to say yet
            return self.get_empty_value_display()
        if obj.is_active:
            return format_html(
                '<span class="health health-healthy" data-state="active">{}</span>',
                gettext("active"),
            )
        return format_html(
            '<span class="health health-unhealthy" data-state="switched-off">{}</span>',
            gettext("switched off"),
        )

    @admin.display(description=_("why"))
    def why(self, obj):
        if obj.pk is None or obj.is_active:
            return self.get_empty_value_display()
        return deactivation.explain(obj.deactivated_reason)

    @admin.display(description=_("the provider's words"))
    def detail(self, obj):
        if obj.pk is None or obj.is_active or not obj.deactivated_reason:
            return self.get_empty_value_display()
        return format_html("<code>{}</code>", obj.deactivated_reason)

    def save_model(self, request, obj, form, change):
        # Switched back on by staff: what switched it off is history, kept in the log.
        if obj.is_active and obj.deactivated_at:
            obj.deactivated_at, obj.deactivated_reason = None, ""
        super().save_model(request, obj, form, change)
        # A signed channel's address is only ever sent signed (a webhook without a secret
        # fails WEBHOOK_NO_SECRET): one is made with the address, or when it becomes one.
        if secret := give_webhook_secret(obj):
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
        for address in queryset.filter(channel__in=signed_channels()):
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
            address__in=queryset.filter(channel__in=signed_channels())
        ).exclude(previous_secret="")
        count = dropped.update(previous_secret="")
        self.message_user(
            request,
            gettext("Previous secrets dropped: %(count)d.") % {"count": count},
            messages.SUCCESS,
        )
