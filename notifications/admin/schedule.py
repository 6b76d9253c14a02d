"""Send now and Cancel: staff moving a delivery that is still waiting, from the deliveries list
(for the rows ticked) and from a delivery's own page, each recorded in the admin's history.

Who may: staff with the change permission on deliveries. The console never edits a delivery's
fields (ReadOnlyAdmin), so that permission is otherwise unused, and it names what these do:
change when, or whether, a row is sent.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable, Sized

from django.contrib import admin, messages
from django.contrib.admin import ActionLocation
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.template.response import TemplateResponse
from django.utils import formats, timezone
from django.utils.translation import gettext, gettext_lazy, gettext_noop, ngettext, ngettext_lazy

from notifications import outbox, wakeup
from notifications.admin.lists import BoundedCountPaginator
from notifications.models import NotificationDelivery, ShownStatus, Status

# The history's notes, stored as these English msgids and translated when shown
# (templates/admin/notifications/object_history.html), as a retry's is (retry.py).
SENT_NOW = gettext_noop("Sent now (made due at once).")
CANCELLED = gettext_noop("Cancelled (it will not be sent).")

# What each action tells staff of the rows it changed, and of those it left because they were
# no longer waiting (_numbered gives their values).
SENT_NOW_DONE = ngettext_lazy(
    "%(n)s delivery is due now; a drain loop sends it next.",
    "%(n)s deliveries are due now; a drain loop sends them next.",
    "count",
)
SENT_NOW_LEFT = ngettext_lazy(
    "%(n)s delivery was not waiting for a later time (it was due already, being "
    "sent or finished); nothing changed for it.",
    "%(n)s deliveries were not waiting for a later time (they were due already, "
    "being sent or finished); nothing changed for them.",
    "count",
)
CANCELLED_DONE = ngettext_lazy(
    "%(n)s delivery cancelled; it will not be sent.",
    "%(n)s deliveries cancelled; they will not be sent.",
    "count",
)
CANCELLED_LEFT = ngettext_lazy(
    "%(n)s delivery was no longer waiting to be sent; nothing changed for it.",
    "%(n)s deliveries were no longer waiting to be sent; nothing changed for them.",
    "count",
)

# How many of the rows to be cancelled the confirmation names; the rest it counts.
CONFIRM_SHOWN = 20
# The most rows one Send now or Cancel takes: the admin's own bound on counting a list.
MAX_ROWS = BoundedCountPaginator.CAP


def is_scheduled(delivery: NotificationDelivery, now) -> bool:
    """Pending, never failed or throttled, and due later: the time its sender asked for.

    A row that failed waits out a backoff instead (it reads as retrying), and one a provider
    throttled waits for the provider: neither is a schedule anyone chose."""
    return (
        delivery.shown_status == ShownStatus.PENDING
        and not delivery.throttles
        and delivery.next_attempt_at > now
    )


def held(delivery: NotificationDelivery, now) -> bool:
    """Pending and due later only because the recipient's quiet hours hold it (nothing has
    moved it since enqueue wrote it so: a Send now or a backoff would have)."""
    return (
        delivery.status == Status.PENDING
        and delivery.held_until is not None
        and delivery.next_attempt_at == delivery.held_until
        and delivery.next_attempt_at > now
    )


def held_note(delivery: NotificationDelivery, time_zone: str | None) -> str:
    """ "held until 07:00 (Europe/Berlin)": the window's end on the recipient's clock, which
    is what their quiet hours are written in (UTC for a recipient without settings)."""
    zone = _zone(time_zone)
    local = delivery.held_until.astimezone(zone)
    return gettext("held until %(time)s (%(zone)s)") % {
        "time": f"{local:%H:%M}",
        "zone": zone.key,
    }


def _zone(name: str | None) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")


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


def schedule_action(*, description, description_plural):
    """An action of ScheduleMixin's: for whoever may schedule, on the deliveries list and on a
    delivery's own page alike."""
    return admin.action(
        permissions=["schedule"],
        description=description,
        description_plural=description_plural,
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )


class ScheduleMixin:
    """The Send now and Cancel actions of a deliveries admin."""

    def has_schedule_permission(self, request) -> bool:
        return request.user.has_perm("notifications.change_notificationdelivery")

    @schedule_action(
        description=gettext_lazy("Send this delivery now"),
        description_plural=gettext_lazy("Send the selected deliveries now"),
    )
    def send_now_selected(self, request, queryset):
        ids = self.selected_ids(request, queryset)
        done = send_now(ids)
        self.log_schedule(request, done, SENT_NOW)
        self.tell_schedule(request, ids=ids, done=done, said=SENT_NOW_DONE, left=SENT_NOW_LEFT)

    @schedule_action(
        description=gettext_lazy("Cancel this delivery…"),
        description_plural=gettext_lazy("Cancel the selected deliveries…"),
    )
    def cancel_selected(self, request, queryset):
        ids = self.selected_ids(request, queryset)
        if request.POST.get("confirmed") != "yes":
            return self.confirm_cancel(request, ids)
        done = outbox.cancel(ids)
        self.log_schedule(request, done, CANCELLED)
        self.tell_schedule(request, ids=ids, done=done, said=CANCELLED_DONE, left=CANCELLED_LEFT)
        return None

    def selected_ids(self, request, queryset) -> list[int]:
        """The selected rows' ids, newest first as listed, at most MAX_ROWS of them: "select
        all" on a large list would otherwise make one request update a million rows."""
        ids = list(
            queryset.order_by("-created_at", "-id").values_list("pk", flat=True)[: MAX_ROWS + 1]
        )
        if len(ids) > MAX_ROWS:
            said = gettext(
                "Only the newest %(max)s of the selected deliveries were taken; run it again "
                "for the rest."
            )
            self.message_user(request, said % {"max": _count(MAX_ROWS)}, messages.WARNING)
        return ids[:MAX_ROWS]

    def confirm_cancel(self, request, ids: list[int]) -> TemplateResponse:
        shown = (
            NotificationDelivery.objects.filter(pk__in=ids)
            .select_related("notification")
            .order_by("-created_at", "-id")[:CONFIRM_SHOWN]
        )
        # The page posts back where the action came from, under that place's field name, and
        # names the very rows it asked about (after "select all" too): a row queued meanwhile
        # was never confirmed.
        on_change_page = "CHANGE_FORM-action" in request.POST
        title = ngettext("Cancel %(n)s delivery?", "Cancel %(n)s deliveries?", len(ids))
        return TemplateResponse(
            request,
            "admin/notifications/confirm_cancel.html",
            {
                **self.admin_site.each_context(request),
                "title": title % {"n": _count(ids)},
                "deliveries": shown,
                "ids": ids,
                "more": _count(len(ids) - CONFIRM_SHOWN) if len(ids) > CONFIRM_SHOWN else "",
                "action_field": "CHANGE_FORM-action" if on_change_page else "action",
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
                "back": request.get_full_path(),
                "opts": self.model._meta,
            },
        )

    def tell_schedule(self, request, *, ids: list[int], done: set[int], said, left) -> None:
        """Say how many of ids an action changed (said), and how many it left alone because
        they were no longer waiting (left), each only when there are any."""
        if done:
            self.message_user(request, said % _numbered(len(done)), messages.SUCCESS)
        if unchanged := len(ids) - len(done):
            self.message_user(request, left % _numbered(unchanged), messages.WARNING)

    def log_schedule(self, request, delivery_ids: Iterable[int], note: str) -> None:
        """One history entry per row changed, against the delivery itself (as log_retry)."""
        kind = ContentType.objects.get_for_model(NotificationDelivery)
        changed = NotificationDelivery.objects.filter(pk__in=list(delivery_ids)).only("channel")
        LogEntry.objects.bulk_create(
            LogEntry(
                user_id=request.user.pk,
                content_type=kind,
                object_id=str(delivery.pk),
                object_repr=str(delivery)[:200],
                action_flag=CHANGE,
                change_message=note,
            )
            for delivery in changed
        )


def _numbered(number: int) -> dict:
    """The values of a sentence that counts rows: its plural by count, the number as n."""
    return {"count": number, "n": _count(number)}


def _count(value: int | Sized) -> str:
    """A number of rows, grouped the staff member's language's way ("1,234", "1 234")."""
    number = value if isinstance(value, int) else len(value)
    return formats.number_format(number, force_grouping=True)
