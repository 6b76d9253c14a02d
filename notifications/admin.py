"""The staff console for the outbox: read-only lists, and Retry through outbox.retry()."""

from __future__ import annotations

import re
import uuid

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Q
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from notifications import catalogue, outbox
from notifications.models import (
    FailedDelivery,
    NeedsAttention,
    Notification,
    NotificationDelivery,
    ShownStatus,
    Status,
)

# Error codes are written in capitals, digits and underscores: SMTP_550, TIMEOUT.
ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]+")


class BoundedCountPaginator(Paginator):
    """Count at most CAP rows, and take the planner's estimate for the whole table.

    The admin would otherwise run count(*) over every matching row on each page view; at a
    million deliveries that alone costs more than the page should.
    """

    CAP = 10_000
    estimated = False  # the count is the planner's estimate (the page says so)
    capped = False  # there are more than CAP rows (the page says so)

    @cached_property
    def count(self):
        if not self.object_list.query.where:
            table = self.object_list.model._meta.db_table
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass",
                    [connection.ops.quote_name(table)],
                )
                estimate = cursor.fetchone()[0]
            if estimate > self.CAP:
                self.estimated = True
                return estimate
        counted = self.object_list[: self.CAP + 1].count()
        self.capped = counted > self.CAP
        return min(counted, self.CAP)


class StatusFilter(admin.SimpleListFilter):
    """Status as people read it: "retrying" is derived, never stored."""

    title = _("status")
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return ShownStatus.choices

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.shown(value) if value in ShownStatus.values else queryset


class ColumnFilter(admin.SimpleListFilter):
    """A filter on one text column's value. A value no such column could hold (a NUL byte,
    longer than the column) matches nothing, where the query itself would fail."""

    field_name: str

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        max_length = NotificationDelivery._meta.get_field(self.field_name).max_length
        if "\x00" in value or len(value) > max_length:
            return queryset.none()
        return queryset.filter(**{self.field_name: value})


class ChannelFilter(ColumnFilter):
    """The configured channels, without a DISTINCT over every delivery to find them."""

    title = _("channel")
    parameter_name = field_name = "channel"

    def lookups(self, request, model_admin):
        return [(name, name) for name in sorted(settings.DELIVERY_CHANNELS)]


class FailureCodeFilter(ColumnFilter):
    """The error codes among failed rows, read through the failed rows' own index."""

    title = _("error code")
    parameter_name = field_name = "error_code"

    def lookups(self, request, model_admin):
        codes = (
            NotificationDelivery.objects.filter(status=Status.FAILED)
            .order_by()
            .values_list("error_code", flat=True)
            .distinct()
        )
        return [(code, code) for code in sorted(codes) if code]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Code owns these rows: staff look, never add or edit them by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class DeliveryInline(admin.TabularInline):
    model = NotificationDelivery
    fields = ("channel", "status", "attempts", "next_attempt_at", "sent_at", "error_code")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Notification)
class NotificationAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "type", "user", "message_key")
    list_filter = (("created_at", admin.DateFieldListFilter),)
    search_fields = ("=id", "=type", "user__username", "user__email")
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    paginator = BoundedCountPaginator
    inlines = [DeliveryInline]


class DeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "channel",
        "notification_type",
        "title",
        "status_badge",
        "attempts",
        "next_attempt_at",
        "error_code",
    )
    list_filter = (StatusFilter, ChannelFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("notification id, recipient or error code",)  # see get_search_results
    search_help_text = _(
        "A notification id, an error code (UPSTREAM_503), or part of a recipient's "
        "username or email."
    )
    list_select_related = ("notification",)
    ordering = ("-created_at", "-id")
    list_per_page = 50
    show_full_result_count = False
    paginator = BoundedCountPaginator
    readonly_fields = (
        "notification",
        "channel",
        "status",
        "attempts",
        "attempt_base",
        "next_attempt_at",
        "attempted_at",
        "sent_at",
        "provider_message_id",
        "error_code",
        "error_message",
        "created_at",
    )

    def get_search_results(self, request, queryset, search_term):
        """Search one thing at a time, each through its own index.

        Django would OR every search field into one condition across three tables, which
        no index can serve: at a million rows that is a sequential scan per search.
        """
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(notification_id=uuid.UUID(term)), False
        except ValueError:
            pass
        if ERROR_CODE.fullmatch(term) and queryset.filter(error_code=term).exists():
            return queryset.filter(error_code=term), False
        users = get_user_model().objects.filter(
            Q(username__icontains=term) | Q(email__icontains=term)
        )
        return queryset.filter(notification__user__in=users.values("pk")), False

    @admin.display(description=_("type"), ordering="notification__type")
    def notification_type(self, delivery):
        return delivery.notification.type

    @admin.display(description=_("title"))
    def title(self, delivery):
        notification = delivery.notification
        return catalogue.render_or_key(
            key=notification.message_key,
            params=notification.message_params,
            language=get_language(),
        ).subject

    @admin.display(description=_("status"), ordering="status")
    def status_badge(self, delivery):
        shown = delivery.shown_status
        return format_html(
            '<span class="status-badge status-{}">{}</span>', shown.value, shown.label
        )


admin.site.register(NotificationDelivery, DeliveryAdmin)


class RetryMixin:
    """Retry through outbox.retry(), recorded in the admin's history."""

    include_failed = False

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("notifications.retry_delivery")

    def retry_rows(self, request, deliveries) -> tuple[int, int]:
        retried = skipped = 0
        for delivery in deliveries:
            if outbox.retry(delivery_id=delivery.pk, include_failed=self.include_failed):
                retried += 1
                self.log_change(request, delivery, _("Retried (requeued with a fresh budget)."))
            else:
                skipped += 1
        return retried, skipped

    def report(self, request, retried: int, skipped: int) -> None:
        if retried:
            text = ngettext("%(n)d delivery requeued.", "%(n)d deliveries requeued.", retried) % {
                "n": retried
            }
            self.message_user(request, text, messages.SUCCESS)
        if skipped:
            text = ngettext(
                "%(n)d delivery was no longer in this list; nothing changed for it.",
                "%(n)d deliveries were no longer in this list; nothing changed for them.",
                skipped,
            ) % {"n": skipped}
            self.message_user(request, text, messages.WARNING)


@admin.register(NeedsAttention)
class NeedsAttentionAdmin(RetryMixin, DeliveryAdmin):
    list_filter = (ChannelFilter, ("created_at", admin.DateFieldListFilter))
    actions = ["retry_selected"]

    def get_queryset(self, request):
        return super().get_queryset(request).needs_attention()

    def get_urls(self):
        urls = super().get_urls()
        retry = path(
            "<int:delivery_id>/retry/",
            self.admin_site.admin_view(require_POST(self.retry_view)),
            name="notifications_needsattention_retry",
        )
        return [retry, *urls]

    def get_list_display(self, request):
        columns = super().get_list_display(request)
        return (*columns, "retry_button") if self.has_retry_permission(request) else columns

    @admin.display(description=_("retry"))
    def retry_button(self, delivery):
        url = reverse("admin:notifications_needsattention_retry", args=[delivery.pk])
        # formaction: submits the changelist's own form (and its CSRF token) to the retry
        # view, so each row gets a POST button without nesting forms.
        return format_html(
            '<button type="submit" class="button retry-button" formaction="{}" '
            'formmethod="post">{}</button>',
            url,
            _("Retry"),
        )

    @admin.action(permissions=["retry"], description=_("Retry the selected deliveries"))
    def retry_selected(self, request, queryset):
        self.report(request, *self.retry_rows(request, queryset))

    def retry_view(self, request, delivery_id: int):
        if not self.has_retry_permission(request):
            raise PermissionDenied
        delivery = NotificationDelivery.objects.filter(pk=delivery_id).first()
        if delivery is None:
            self.message_user(request, _("No such delivery."), messages.ERROR)
        else:
            self.report(request, *self.retry_rows(request, [delivery]))
        return HttpResponseRedirect(reverse("admin:notifications_needsattention_changelist"))


@admin.register(FailedDelivery)
class FailedDeliveryAdmin(RetryMixin, DeliveryAdmin):
    list_filter = (ChannelFilter, FailureCodeFilter, ("created_at", admin.DateFieldListFilter))
    actions = ["retry_failed"]
    include_failed = True

    def get_queryset(self, request):
        return super().get_queryset(request).filter(status=Status.FAILED)

    @admin.action(
        permissions=["retry"], description=_("Retry the selected failed deliveries anyway…")
    )
    def retry_failed(self, request, queryset):
        if request.POST.get("confirmed") != "yes":
            return TemplateResponse(
                request,
                "admin/notifications/confirm_retry_failed.html",
                {
                    **self.admin_site.each_context(request),
                    "title": _("Retry failed deliveries?"),
                    "deliveries": queryset,
                    "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
                    "opts": self.model._meta,
                },
            )
        self.report(request, *self.retry_rows(request, queryset))
        return None
