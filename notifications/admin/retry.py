"""Needs attention and failed deliveries, and the Retry that puts them back in the queue
(through outbox.retry(), recorded in the admin's history)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop, ngettext, ngettext_lazy
from django.views.decorators.http import require_POST

from notifications import outbox
from notifications.admin.deliveries import DeliveryAdmin
from notifications.admin.lists import ChannelFilter, CreatedFilter, FailureCodeFilter
from notifications.models import (
    FailedDelivery,
    NeedsAttention,
    NotificationDelivery,
    Status,
)

# The history's note for a retry, stored as this English msgid and translated when shown
# (templates/admin/notifications/object_history.html). A LogEntry keeps its change message as
# text written once, for every later reader: translated at write time it would stay in the
# language of whoever retried. Django's JSON change messages are translated when shown, but
# only say "Changed <fields>", which would not tell a retry from an edit.
RETRIED = gettext_noop("Retried (requeued with a fresh budget).")


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
                self.log_retry(request, delivery)
            else:
                skipped += 1
        return retried, skipped

    def log_retry(self, request, delivery) -> None:
        """Record the retry against the delivery itself, not against this list's proxy.

        After the retry the row is no longer dead, so the proxy's change page would answer
        "doesn't exist"; the delivery's own page always has it. The stored name (str(), the
        "#9 · email" of the model) holds no words, as it is written once for every language.
        """
        LogEntry.objects.create(
            user_id=request.user.pk,
            content_type=ContentType.objects.get_for_model(delivery, for_concrete_model=True),
            object_id=str(delivery.pk),
            object_repr=str(delivery)[:200],
            action_flag=CHANGE,
            change_message=RETRIED,
        )

    def history_view(self, request, object_id, extra_context=None):
        # Retries are recorded against the delivery itself (log_retry), so its history is the
        # one that has them; this list's own would stay empty.
        return HttpResponseRedirect(
            reverse("admin:notifications_notificationdelivery_history", args=[object_id])
        )

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


DEAD_ROWS_NEED_NOT = {"attempts", "next_attempt", "lane", "status_badge"}


@admin.register(NeedsAttention)
class NeedsAttentionAdmin(RetryMixin, DeliveryAdmin):
    list_title = _("Select a delivery needing attention to view")
    view_title = _("View delivery needing attention")
    search_title = _("Search deliveries needing attention")
    counted = ngettext_lazy(
        "%(number)s delivery needs attention", "%(number)s deliveries need attention", "count"
    )
    select_all = _("Select all %(number)s deliveries needing attention")
    list_filter = (ChannelFilter, ("created_at", CreatedFilter))
    actions = ["retry_selected"]

    def get_queryset(self, request):
        return super().get_queryset(request).needs_attention()

    def changelist_title(self, request) -> str:
        if self.has_retry_permission(request):
            return _("Select a delivery needing attention to view or retry")
        return self.list_title

    def get_urls(self):
        urls = super().get_urls()
        retry = path(
            "<int:delivery_id>/retry/",
            self.admin_site.admin_view(require_POST(self.retry_view)),
            name="notifications_needsattention_retry",
        )
        return [retry, *urls]

    def get_list_display(self, request):
        # A dead row has no next attempt, its attempts are the whole budget, a Retry puts it
        # back on its own lane whatever that is, and every row here is dead (the list's title
        # says so): without those four columns the list fits
        # beside the admin's sidebars at 1280 px (a delivery's page still shows them all).
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
    list_title = _("Select a failed delivery to view")
    view_title = _("View failed delivery")
    search_title = _("Search failed deliveries")
    counted = ngettext_lazy("%(number)s failed delivery", "%(number)s failed deliveries", "count")
    select_all = _("Select all %(number)s failed deliveries")
    list_filter = (ChannelFilter, FailureCodeFilter, ("created_at", CreatedFilter))
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
