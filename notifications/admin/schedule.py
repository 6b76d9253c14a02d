"""Send now and Cancel: staff moving a delivery that is still waiting, from the deliveries list
(for the rows ticked) and from a delivery's own page, each recorded in the admin's history.

Who may: staff with the change permission on deliveries. The console never edits a delivery's
fields (ReadOnlyAdmin), so that permission is otherwise unused, and it names what these do:
change when, or whether, a row is sent.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib import admin, messages
from django.contrib.admin import ActionLocation
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.template.response import TemplateResponse
from django.utils import formats, timezone
from django.utils.translation import gettext_lazy, gettext_noop, ngettext

from notifications import outbox, wakeup
from notifications.models import NotificationDelivery, ShownStatus

# The history's notes, stored as these English msgids and translated when shown
# (templates/admin/notifications/object_history.html), as a retry's is (retry.py).
SENT_NOW = gettext_noop("Sent now (made due at once).")
CANCELLED = gettext_noop("Cancelled (it will not be sent).")

BOTH = [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM]
# How many of the rows to be cancelled the confirmation names; the rest it counts.
CONFIRM_SHOWN = 20


def is_scheduled(delivery: NotificationDelivery, now) -> bool:
    """Pending, never failed or throttled, and due later: the time its sender asked for.

    A row that failed waits out a backoff instead (it reads as retrying), and one a provider
    throttled waits for the provider: neither is a schedule anyone chose."""
    return (
        delivery.shown_status == ShownStatus.PENDING
        and not delivery.throttles
        and delivery.next_attempt_at > now
    )


def moment(value) -> str:
    """A time as the staff member reads it: their language's format, in the active time zone,
    which it names (the site keeps no time zone per person)."""
    local = timezone.localtime(value)
    return f"{formats.date_format(local, 'DATETIME_FORMAT')} {local.tzname()}"


def send_now(delivery_ids: list[int]) -> set[int]:
    """Make the waiting rows among delivery_ids due now (outbox.send_now), and wake the drains
    once that is committed; return the ids that moved."""
    done = outbox.send_now(delivery_ids)
    if done:
        transaction.on_commit(wakeup.request_wake, robust=True)
    return done


class ScheduleMixin:
    """The Send now and Cancel actions of a deliveries admin."""

    def has_schedule_permission(self, request) -> bool:
        return request.user.has_perm("notifications.change_notificationdelivery")

    @admin.action(
        permissions=["schedule"],
        description=gettext_lazy("Send this delivery now"),
        description_plural=gettext_lazy("Send the selected deliveries now"),
        location=BOTH,
    )
    def send_now_selected(self, request, queryset):
        ids = _ids(queryset)
        done = send_now(ids)
        self.log_schedule(request, done, SENT_NOW)
        self.report_schedule(
            request,
            done=len(done),
            skipped=len(ids) - len(done),
            said=ngettext(
                "%(n)d delivery is due now; a drain loop sends it next.",
                "%(n)d deliveries are due now; a drain loop sends them next.",
                len(done),
            ),
        )

    @admin.action(
        permissions=["schedule"],
        description=gettext_lazy("Cancel this delivery…"),
        description_plural=gettext_lazy("Cancel the selected deliveries…"),
        location=BOTH,
    )
    def cancel_selected(self, request, queryset):
        ids = _ids(queryset)
        if request.POST.get("confirmed") != "yes":
            return self.confirm_cancel(request, ids)
        done = outbox.cancel(ids)
        self.log_schedule(request, done, CANCELLED)
        self.report_schedule(
            request,
            done=len(done),
            skipped=len(ids) - len(done),
            said=ngettext(
                "%(n)d delivery cancelled; it will not be sent.",
                "%(n)d deliveries cancelled; they will not be sent.",
                len(done),
            ),
        )
        return None

    def confirm_cancel(self, request, ids: list[int]) -> TemplateResponse:
        shown = (
            NotificationDelivery.objects.filter(pk__in=ids)
            .select_related("notification")
            .order_by("-created_at", "-id")[:CONFIRM_SHOWN]
        )
        # The page posts back where the action came from, under that place's field name.
        on_change_page = "CHANGE_FORM-action" in request.POST
        return TemplateResponse(
            request,
            "admin/notifications/confirm_cancel.html",
            {
                **self.admin_site.each_context(request),
                "title": ngettext("Cancel %(n)d delivery?", "Cancel %(n)d deliveries?", len(ids))
                % {"n": len(ids)},
                "deliveries": shown,
                "ids": ids,
                "more": max(len(ids) - CONFIRM_SHOWN, 0),
                "action_field": "CHANGE_FORM-action" if on_change_page else "action",
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
                "back": request.get_full_path(),
                "opts": self.model._meta,
            },
        )

    def log_schedule(self, request, delivery_ids: Iterable[int], note: str) -> None:
        """One history entry per row changed, against the delivery itself (as log_retry)."""
        kind = ContentType.objects.get_for_model(NotificationDelivery)
        LogEntry.objects.bulk_create(
            LogEntry(
                user_id=request.user.pk,
                content_type=kind,
                object_id=str(pk),
                object_repr=f"#{pk} · {channel}",
                action_flag=CHANGE,
                change_message=note,
            )
            for pk, channel in NotificationDelivery.objects.filter(
                pk__in=list(delivery_ids)
            ).values_list("pk", "channel")
        )

    def report_schedule(self, request, *, done: int, skipped: int, said: str) -> None:
        if done:
            self.message_user(request, said % {"n": done}, messages.SUCCESS)
        if skipped:
            text = ngettext(
                "%(n)d delivery was no longer waiting to be sent; nothing changed for it.",
                "%(n)d deliveries were no longer waiting to be sent; nothing changed for them.",
                skipped,
            ) % {"n": skipped}
            self.message_user(request, text, messages.WARNING)


def _ids(queryset) -> list[int]:
    return list(queryset.order_by().values_list("pk", flat=True))
