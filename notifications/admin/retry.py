"""Needs attention and failed deliveries, and the Retry that puts them back in the queue
(through outbox.retry(), recorded in the admin's history)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from notifications import outbox
from notifications.admin.deliveries import DeliveryAdmin
from notifications.admin.lists import ChannelFilter, FailureCodeFilter
from notifications.models import (
    FailedDelivery,
    NeedsAttention,
    NotificationDelivery,
    Status,
)


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


DEAD_ROWS_NEED_NOT = {"attempts", "next_attempt_at"}


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
        # A dead row has no next attempt, and its attempts are the whole budget: without those
        # two columns the list fits beside the admin's sidebars at 1280 px.
        columns = [c for c in super().get_list_display(request) if c not in DEAD_ROWS_NEED_NOT]
        # Retry first, beside the row's checkbox: at the end it fell behind a sideways scroll.
        return ("retry_button", *columns) if self.has_retry_permission(request) else columns

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
