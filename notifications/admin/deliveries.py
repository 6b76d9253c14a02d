"""Notifications and deliveries: what staff look through, and the deliveries' Send now and
Cancel (schedule.py)."""

from __future__ import annotations

import json
import re
import uuid

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.db.models import F, Q
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import get_language, ngettext_lazy
from django.utils.translation import gettext_lazy as _

from core.admin_wording import Worded
from notifications.admin import digest_items
from notifications.admin.lists import (
    BoundedCountPaginator,
    ChannelFilter,
    CreatedFilter,
    LaneFilter,
    ReadOnlyAdmin,
    SkipReasonFilter,
    StatusFilter,
)
from notifications.admin.schedule import ScheduleMixin, held, held_note, is_scheduled, moment
from notifications.models import (
    DatabaseNow,
    DigestItem,
    Notification,
    NotificationDelivery,
    ShownStatus,
    Status,
)
from recipients import catalogue

# Error codes are written in capitals, digits and underscores: SMTP_550, TIMEOUT.
ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]+")


# What the deliveries' lists and pages annotate their rows with: the database's clock, which
# "scheduled" and "held" are measured against, and the recipient's time zone, which a hold
# is shown in (None: the recipient has no settings, so UTC).
ANNOTATIONS = {
    "db_now": DatabaseNow(),
    "recipient_time_zone": F("notification__user__notification_recipient__time_zone"),
}


def next_attempt(delivery) -> str | None:
    """When a drain may next claim it; for a row its sender scheduled, or the recipient's
    quiet hours hold, said so; nothing for a row no drain will claim (being sent, finished or
    skipped). The row carries ANNOTATIONS."""
    if delivery.status != Status.PENDING:
        return None
    if held(delivery, delivery.db_now):
        return held_note(delivery, delivery.recipient_time_zone)
    if is_scheduled(delivery, delivery.db_now):
        return _("scheduled for %(when)s") % {"when": moment(delivery.next_attempt_at)}
    return moment(delivery.next_attempt_at)


def subject(notification, *, gathered: int | None) -> str:
    """What a notification says, in the staff member's language: its subject, or a digest's
    title (gathered: how many notifications it holds)."""
    if digest_items.is_carrier(notification):
        return digest_items.title(notification, gathered)
    return catalogue.render_or_key(
        key=notification.message_key,
        params=notification.message_params,
        language=get_language(),
    ).subject


def notification_title(notification, *, gathered: int | None) -> str:
    """A notification's name on its page and in links to it: what it says, and to whom.

    Its str() ("welcome → #2", the recipient's id) stays free of words for the admin's
    history; this is for staff reading a page now, in their language."""
    return _("%(subject)s — to %(recipient)s") % {
        "subject": subject(notification, gathered=gathered),
        "recipient": notification.user.get_username(),
    }


def type_label(notification) -> str:
    """The catalogue's name for a notification's kind: its category's label ("Security"), or
    "Digest"; empty for a type the catalogue no longer has."""
    if digest_items.is_carrier(notification):
        return str(_("Digest"))
    message = catalogue.MESSAGES.get(notification.type)
    return str(catalogue.CATEGORIES[message.category].label) if message else ""


def type_key(key: str) -> str:
    # A type is a catalogue key ("account.password_reset"): it may break after a dot, so a
    # narrow list wraps it there rather than growing wider than the window.
    parts = key.split(".")
    return format_html_join(mark_safe(".<wbr>"), "{}", ((part,) for part in parts))


def may_view(model_admin, request, model) -> bool:
    """Whether request's staff member may open model's pages (a link to one is offered)."""
    site = model_admin.admin_site
    return site.is_registered(model) and site.get_model_admin(model).has_view_permission(request)


class DigestPage:
    """A change page with the digests' sections after the fields (digest_items.CHANGE_FORM):
    digest_context() says what they show of the object, when there is one, and
    object_title() what the page calls it (None: its str())."""

    change_form_template = digest_items.CHANGE_FORM

    def digest_context(self, request, obj) -> dict:
        raise NotImplementedError

    def object_title(self, obj) -> str | None:
        return None

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if obj is not None:
            context.update(self.digest_context(request, obj))
            if (title := self.object_title(obj)) is not None:
                # The heading under the page's title, the window's title and the breadcrumb.
                context["subtitle"] = context["object_title"] = title
        return super().change_view(request, object_id, form_url, context)


class DeliveryInline(admin.TabularInline):
    model = NotificationDelivery
    fields = (
        "channel",
        "lane",
        "status_shown",
        "attempts",
        "next_attempt",
        "sent_at",
        "error_code",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(**ANNOTATIONS)

    # A readonly method's None would be printed "None": the admin's mark for an empty value
    # instead, as on the delivery's own page.
    @admin.display(description=_("next attempt"))
    def next_attempt(self, delivery):
        return next_attempt(delivery) or self.get_empty_value_display()

    @admin.display(description=_("status"))
    def status_shown(self, delivery):
        return status_text(delivery)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Notification)
class NotificationAdmin(DigestPage, Worded, ReadOnlyAdmin):
    list_title = _("Select a notification to view")
    view_title = _("View notification")
    search_title = _("Search notifications")
    counted = ngettext_lazy("%(number)s notification", "%(number)s notifications", "count")
    select_all = _("Select all %(number)s notifications")
    list_display = ("created_at", "kind", "user", "message")
    list_filter = (("created_at", CreatedFilter),)
    search_fields = ("=id", "=type", "user__username", "user__email")
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    paginator = BoundedCountPaginator
    inlines = [DeliveryInline]
    # The stored parameters, with the secret ones hidden (catalogue.Message.secret): a staff
    # member who may view notifications must not be able to use a user's reset link.
    exclude = ("message_params",)
    # The type and the message in the catalogue's words, as the list shows them, not as keys.
    fields = (
        "user",
        "kind",
        "message",
        "action_url",
        "created_at",
        "read_at",
        "archived_at",
        "inbox_at",
        "cancel_key",
        "parameters",
    )
    readonly_fields = ("kind", "message", "parameters")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(gathered=digest_items.GATHERED_COUNT)

    def object_title(self, notification) -> str:
        return notification_title(notification, gathered=notification.gathered)

    # What kind of notification, in the catalogue's words, above the key staff search by
    # (=type) and senders write.
    @admin.display(description=_("type"), ordering="type")
    def kind(self, notification):
        label = type_label(notification)
        key = format_html('<code class="type-key">{}</code>', type_key(notification.type))
        return format_html("{}<br>{}", label, key) if label else key

    @admin.display(description=_("message"))
    def message(self, notification):
        return subject(notification, gathered=notification.gathered)

    def digest_context(self, request, notification) -> dict:
        return {
            "digest_sections": digest_items.for_notification(
                notification, linked=may_view(self, request, Notification)
            ),
            "digest_carriers": digest_items.carriers_of(
                notification, linked=may_view(self, request, NotificationDelivery)
            ),
        }

    @admin.display(description=_("parameters"))
    def parameters(self, notification):
        shown = catalogue.shown_params(
            key=notification.message_key, params=notification.message_params
        )
        return json.dumps(shown, ensure_ascii=False, indent=2)


class DeliveryAdmin(DigestPage, ScheduleMixin, Worded, ReadOnlyAdmin):
    list_title = _("Select a delivery to view")
    view_title = _("View delivery")
    search_title = _("Search deliveries")
    counted = ngettext_lazy("%(number)s delivery", "%(number)s deliveries", "count")
    select_all = _("Select all %(number)s deliveries")
    list_display = (
        "created_at",
        "channel",
        "lane",
        "notification_type",
        "title",
        "status_badge",
        "attempts",
        "next_attempt",
        "error_code",
    )
    list_filter = (
        StatusFilter,
        SkipReasonFilter,
        ChannelFilter,
        LaneFilter,
        ("created_at", CreatedFilter),
    )
    actions = ["send_now_selected", "cancel_selected"]
    search_fields = ("notification id, recipient or error code",)  # see get_search_results
    search_help_text = _(
        "A notification id, an error code (HTTP_503), or part of a recipient's username or email."
    )
    list_select_related = ("notification",)
    ordering = ("-created_at", "-id")
    list_per_page = 50
    show_full_result_count = False
    paginator = BoundedCountPaginator
    # Shown as next_attempt (which says "scheduled for …", or "held until …"), not twice; the
    # hold as held, in the recipient's time zone; the notification as notification_link.
    exclude = ("next_attempt_at", "held_until", "held_from", "decided_version", "notification")
    readonly_fields = (
        "notification_link",
        "channel",
        "lane",
        "status",
        "skip_reason",
        "held",
        "attempts",
        "attempt_base",
        "throttles",
        "unreported_claims",
        "next_attempt",
        "attempted_at",
        "sent_at",
        "provider_message_id",
        "error_code",
        "error_message",
        "created_at",
    )

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(**ANNOTATIONS, digest_item_count=digest_items.ITEM_COUNT)
        )

    def digest_context(self, request, delivery) -> dict:
        return {
            "digest_sections": digest_items.for_delivery(
                delivery, linked=may_view(self, request, Notification)
            )
        }

    def get_search_results(self, request, queryset, search_term):
        """Search one thing at a time, each through its own index.

        Django would OR every search field into one condition across three tables, which
        no index can serve: at a million rows that is a sequential scan per search.
        """
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            notification_id = uuid.UUID(term)
        except ValueError:
            pass
        else:
            # A notification gathered into a digest has no delivery of its own there: its
            # digests are found too, through digest_items' index on the notification.
            carriers = DigestItem.objects.filter(notification_id=notification_id)
            return queryset.filter(
                Q(notification_id=notification_id) | Q(pk__in=carriers.values("carrier_id"))
            ), False
        if ERROR_CODE.fullmatch(term) and queryset.filter(error_code=term).exists():
            return queryset.filter(error_code=term), False
        users = get_user_model().objects.filter(
            Q(username__icontains=term) | Q(email__icontains=term)
        )
        return queryset.filter(notification__user__in=users.values("pk")), False

    @admin.display(description=_("type"), ordering="notification__type")
    def notification_type(self, delivery):
        return type_key(delivery.notification.type)

    @admin.display(description=_("title"))
    def title(self, delivery):
        return subject(delivery.notification, gathered=delivery.digest_item_count)

    # The notification by what it says and to whom, rather than by its str() ("welcome → #2"),
    # linked to its page as Django links a read-only foreign key.
    @admin.display(description=_("notification"))
    def notification_link(self, delivery):
        notification = (
            Notification.objects.annotate(gathered=digest_items.GATHERED_COUNT)
            .select_related("user")
            .get(pk=delivery.notification_id)
        )
        url = reverse("admin:notifications_notification_change", args=[notification.pk])
        name = notification_title(notification, gathered=notification.gathered)
        return format_html('<a href="{}">{}</a>', url, name)

    # On a change page a readonly method's None is printed as "None"; the admin's own mark for
    # an empty value is shown instead, as for the row's other empty fields.
    @admin.display(description=_("next attempt"), ordering="next_attempt_at")
    def next_attempt(self, delivery):
        return next_attempt(delivery) or self.get_empty_value_display()

    @admin.display(description=_("quiet hours"))
    def held(self, delivery):
        """When the recipient's quiet hours let it go, on their clock (whether or not it has
        been sent since)."""
        if delivery.held_until is None:
            return self.get_empty_value_display()
        return held_note(delivery, delivery.recipient_time_zone)

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, delivery):
        return format_html(
            '<span class="status-badge status-{}">{}</span>',
            delivery.shown_status.value,
            status_text(delivery),
        )


def status_text(delivery) -> str:
    """The status people read, and for a skipped row why: "skipped (opted out)"."""
    shown = delivery.shown_status
    if shown == ShownStatus.SKIPPED and delivery.skip_reason:
        return _("%(status)s (%(reason)s)") % {
            "status": shown.label,
            "reason": delivery.get_skip_reason_display(),
        }
    return str(shown.label)


admin.site.register(NotificationDelivery, DeliveryAdmin)
