"""The admin's list machinery: counts that stay cheap at a million rows, and the filters."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connection
from django.utils.functional import cached_property
from django.utils.translation import gettext_lazy as _

from notifications import lanes
from notifications.models import (
    NotificationDelivery,
    ShownStatus,
    SkipReason,
    Status,
)


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


class LaneFilter(ColumnFilter):
    """The configured lanes, in claim order (DELIVERY_LANES), without a DISTINCT over every
    delivery to find them."""

    title = _("lane")
    parameter_name = field_name = "lane"

    def lookups(self, request, model_admin):
        return [(name, name) for name in lanes.names()]


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


class SkipReasonFilter(ColumnFilter):
    """Why enqueue wrote a row as skipped: "I never got it" is answered by opted_out."""

    title = _("why skipped")
    parameter_name = field_name = "skip_reason"

    def lookups(self, request, model_admin):
        return SkipReason.choices

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        if value not in SkipReason.values:
            return queryset.none()
        # The status too, so the skipped rows' own index serves it (a reason implies skipped:
        # a CHECK says so, but the planner does not know).
        return queryset.filter(status=Status.SKIPPED, skip_reason=value)


class CreatedFilter(admin.DateFieldListFilter):
    """The creation date filter, titled as a noun: Django heads a filter "By <field's name>",
    and the field's name "created" made that "Nach erstellt" in German."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = _("creation date")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Code owns these rows: staff look, never add or edit them by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
