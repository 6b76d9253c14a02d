"""Broadcasts in the staff console: the list, each one's progress per channel on its page, Send,
Retry for failed chunks and Cancel (notifications/broadcasts.py does the work).

Code writes broadcasts and their chunks, so no field of one is ever edited (ReadOnlyAdmin).
Staff act on them through three doors, each behind its own permission: Send replaces the add
page (notifications.add_broadcast) with a form that calls send_broadcast() once its audience's
size is confirmed; Retry sends the failed chunks back (notifications.change_broadcast, which
nothing else uses); Cancel (notifications.cancel_broadcast). The list reads only
the broadcasts and their chunks (BroadcastQuerySet.with_progress): a page of a hundred
broadcasts never counts their deliveries. A broadcast's own page does, once, through
broadcasts.progress().
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.translation import gettext, gettext_noop, ngettext, ngettext_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from core.admin_wording import Worded
from notifications import broadcasts
from notifications.admin.broadcast_form import SendBroadcastForm
from notifications.admin.deliveries import type_key
from notifications.admin.lists import CreatedFilter, LaneFilter, ReadOnlyAdmin
from notifications.admin.schedule import moment
from notifications.models import (
    Broadcast,
    BroadcastChunk,
    BroadcastState,
    ChunkStatus,
    SkipReason,
    Status,
)
from recipients import audiences, catalogue

# The history's note, stored as this English msgid and translated when shown
# (templates/admin/notifications/object_history.html), as a retry's is (retry.py).
BROADCAST_CANCELLED = gettext_noop("Cancelled the broadcast (no more of it will be sent).")
BROADCAST_SENT = gettext_noop("Sent the broadcast from the console.")
CHUNKS_RETRIED = gettext_noop("Sent the failed chunks back to the drain loops.")

# How many failed chunks a broadcast's page lists with their errors; the rest it counts.
FAILED_CHUNKS_SHOWN = 20

# A state's badge takes the colour of the delivery status it is most like (static/css/admin.css).
BADGE_CLASSES = {
    BroadcastState.EXPANDING: "status-processing",
    BroadcastState.EXPANDED: "status-sent",
    BroadcastState.FAILED: "status-failed",
    BroadcastState.CANCELLED: "status-cancelled",
}


def grouped(number: int) -> str:
    """A count as the staff member's language writes it ("20,000", "20 000")."""
    return formats.number_format(number, force_grouping=True)


def progress_columns() -> list[tuple[str, str]]:
    """The states of broadcasts.progress(), in the order its table shows them, each with its
    heading in the active language."""
    skipped = [
        (
            f"skipped:{reason.value}",
            gettext("%(status)s (%(reason)s)")
            % {"status": Status.SKIPPED.label, "reason": reason.label},
        )
        for reason in SkipReason
    ]
    return [
        ("queued", gettext("queued")),
        ("held", gettext("held by quiet hours")),
        ("processing", str(Status.PROCESSING.label)),
        ("sent", str(Status.SENT.label)),
        ("failed", str(Status.FAILED.label)),
        ("dead", str(Status.DEAD.label)),
        ("cancelled", str(Status.CANCELLED.label)),
        *skipped,
        ("digested", gettext("joined a digest")),
    ]


def progress_table(found: broadcasts.Progress) -> dict:
    """broadcasts.progress() as a table: a row per channel, a column per state. A state the
    columns do not name (none today) gets a column of its own rather than going unseen."""
    columns = progress_columns()
    named = {key for key, _heading in columns}
    for counts in found.channels.values():
        for key in sorted(set(counts) - named):
            columns.append((key, key))
            named.add(key)
    rows = [
        {"channel": channel, "counts": [grouped(counts.get(key, 0)) for key, _ in columns]}
        for channel, counts in sorted(found.channels.items())
    ]
    return {"headings": [heading for _key, heading in columns], "rows": rows}


class BroadcastStateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return BroadcastState.choices

    def queryset(self, request, queryset):
        value = self.value()
        if value in BroadcastState.values:
            return queryset.filter(state=value)
        return queryset.none() if value else queryset


@admin.register(Broadcast)
class BroadcastAdmin(Worded, ReadOnlyAdmin):
    list_title = _("Select a broadcast to view")
    view_title = _("View broadcast")
    search_title = _("Search broadcasts")
    counted = ngettext_lazy("%(number)s broadcast", "%(number)s broadcasts", "count")
    select_all = _("Select all %(number)s broadcasts")
    list_display = ("kind", "audience_label", "created_at", "lane", "expanded_of_total", "badge")
    list_filter = (BroadcastStateFilter, LaneFilter, ("created_at", CreatedFilter))
    search_fields = ("=type", "audience_label")
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    # The stored parameters, with the secret ones hidden, as a notification's page shows them.
    fields = (
        "kind",
        "audience",
        "audience_label",
        "created_at",
        "lane",
        "send_at",
        "channels",
        "action_url",
        "cancel_key",
        "expanded_of_total",
        "badge",
        "cancelled_at",
        "parameters",
    )
    readonly_fields = ("kind", "expanded_of_total", "badge", "parameters")
    change_form_template = "admin/notifications/broadcast_change_form.html"
    change_list_template = "admin/notifications/broadcast_change_list.html"

    def get_queryset(self, request):
        return super().get_queryset(request).with_progress()

    def get_urls(self):
        return [
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(require_POST(self.cancel_view)),
                name="notifications_broadcast_cancel",
            ),
            path(
                "<path:object_id>/retry-chunks/",
                self.admin_site.admin_view(require_POST(self.retry_chunks_view)),
                name="notifications_broadcast_retry_chunks",
            ),
            *super().get_urls(),
        ]

    def has_add_permission(self, request, obj=None) -> bool:
        # Adding is sending (add_view): the form is the console's own, never the model's.
        return request.user.has_perm("notifications.add_broadcast")

    def has_cancel_permission(self, request) -> bool:
        return request.user.has_perm("notifications.cancel_broadcast")

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("notifications.change_broadcast")

    @admin.display(description=_("type"), ordering="type")
    def kind(self, broadcast):
        message = catalogue.MESSAGES.get(broadcast.type)
        key = format_html('<code class="type-key">{}</code>', type_key(broadcast.type))
        if message is None:
            return key
        return format_html("{}<br>{}", catalogue.CATEGORIES[message.category].label, key)

    @admin.display(description=_("recipients expanded"))
    def expanded_of_total(self, broadcast):
        return gettext("%(expanded)s of %(total)s") % {
            "expanded": grouped(broadcast.expanded),
            "total": grouped(broadcast.recipients),
        }

    @admin.display(description=_("state"), ordering="state")
    def badge(self, broadcast):
        state = BroadcastState(broadcast.state)
        return format_html(
            '<span class="status-badge {}">{}</span>', BADGE_CLASSES[state], state.label
        )

    @admin.display(description=_("parameters"))
    def parameters(self, broadcast):
        shown = catalogue.shown_params(key=broadcast.type, params=broadcast.message_params)
        return json.dumps(shown, ensure_ascii=False, indent=2)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        broadcast = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if broadcast is not None:
            found = broadcasts.progress(broadcast)
            failed = (
                BroadcastChunk.objects.filter(broadcast=broadcast, status=ChunkStatus.FAILED)
                .order_by("number")
                .only("number", "attempts", "error")
            )
            context |= {
                "progress": found,
                "progress_table": progress_table(found),
                "summary": {
                    "expanded_of_total": gettext("%(expanded)s of %(total)s")
                    % {"expanded": grouped(found.expanded), "total": grouped(found.total)},
                    "chunks_left": grouped(found.chunks_left),
                    "chunks_failed": grouped(found.chunks_failed),
                },
                "failed_chunks": failed[:FAILED_CHUNKS_SHOWN],
                "more_failed_chunks": max(found.chunks_failed - FAILED_CHUNKS_SHOWN, 0),
                "may_cancel": (
                    broadcast.cancelled_at is None and self.has_cancel_permission(request)
                ),
                "may_retry": (
                    found.chunks_failed > 0
                    and broadcast.cancelled_at is None
                    and self.has_retry_permission(request)
                ),
            }
        return super().change_view(request, object_id, form_url, context)

    def add_view(self, request, form_url="", extra_context=None):
        """Send a broadcast, in two steps: the form, then the audience's size to confirm. Only
        the confirmed POST (confirmed=yes, the form's fields again) sends, after checking the
        fields once more: the audience may have gone since."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = SendBroadcastForm(request.POST if request.method == "POST" else None)
        if not form.is_bound or not form.is_valid():
            return self._send_page(request, form)
        audience = form.cleaned_data["audience"]
        size = audiences.size(audience)
        if not size:
            form.add_error(
                "audience",
                gettext("%(audience)s has no members now: nobody would receive it.")
                % {"audience": audience.name},
            )
            return self._send_page(request, form)
        if request.POST.get("confirmed") == "yes":
            return self._send(request, form)
        if request.POST.get("edit") == "yes":
            return self._send_page(request, form)
        goes_to = ngettext(
            "This goes to %(number)s member of %(audience)s.",
            "This goes to %(number)s members of %(audience)s.",
            size,
        ) % {"number": grouped(size), "audience": audience.name}
        return self._send_page(
            request, form, confirming=True, goes_to=goes_to, summary=self._summary(form)
        )

    def _send_page(self, request, form: SendBroadcastForm, **context):
        """The form, or with confirming=True its confirmation (the fields kept hidden)."""
        return TemplateResponse(
            request,
            "admin/notifications/send_broadcast.html",
            {
                **self.admin_site.each_context(request),
                "title": gettext("Send a broadcast"),
                "opts": self.opts,
                "form": form,
                "confirming": False,
                **context,
            },
        )

    def _summary(self, form: SendBroadcastForm) -> list[tuple[str, str]]:
        """What the confirmation repeats of the form, in the form's words."""
        data = form.cleaned_data
        channels = dict(form.fields["channels"].choices)
        when = data["send_at"]
        return [
            (form.fields["type"].label, dict(form.fields["type"].choices)[data["type"]]),
            (
                form.fields["params"].label,
                json.dumps(data["params"], ensure_ascii=False) if data["params"] else "—",
            ),
            (
                form.fields["channels"].label,
                ", ".join(channels[name] for name in data["channels"])
                or gettext("each recipient's own"),
            ),
            (form.fields["priority"].label, data["priority"]),
            (
                form.fields["send_at"].label,
                moment(when) if when is not None and when > timezone.now() else gettext("at once"),
            ),
            (form.fields["cancel_key"].label, data["cancel_key"] or "—"),
            (form.fields["action_url"].label, data["action_url"] or "—"),
        ]

    def _send(self, request, form: SendBroadcastForm):
        try:
            with transaction.atomic():
                broadcast = broadcasts.send_broadcast(**form.arguments())
                self.log_addition(request, broadcast, BROADCAST_SENT)
        except (ValueError, TypeError, LookupError) as exc:
            # The form checked every field already; this is send_broadcast's last word, in
            # its own (English) sentence, should the two ever disagree.
            form.add_error(None, str(exc))
            return self._send_page(request, form)
        self.message_user(
            request,
            ngettext(
                "Broadcast queued for %(number)s recipient; the drain loops expand it next.",
                "Broadcast queued for %(number)s recipients; the drain loops expand it next.",
                broadcast.recipients,
            )
            % {"number": grouped(broadcast.recipients)},
            messages.SUCCESS,
        )
        if self.has_view_permission(request, broadcast):
            return HttpResponseRedirect(
                reverse("admin:notifications_broadcast_change", args=[broadcast.pk])
            )
        return HttpResponseRedirect(reverse("admin:index"))

    def retry_chunks_view(self, request, object_id):
        """Send the broadcast's failed chunks back to the drains, each with a fresh budget."""
        if not self.has_retry_permission(request):
            raise PermissionDenied
        broadcast = self.get_object(request, unquote(object_id))
        if broadcast is None:
            raise Http404
        with transaction.atomic():
            count = broadcasts.retry_failed_chunks(broadcast)
            if count:
                self.log_change(request, broadcast, CHUNKS_RETRIED)
        if count:
            self.message_user(
                request,
                ngettext(
                    "%(number)s failed chunk went back to the drain loops.",
                    "%(number)s failed chunks went back to the drain loops.",
                    count,
                )
                % {"number": grouped(count)},
                messages.SUCCESS,
            )
        elif broadcast.cancelled_at is not None:
            self.message_user(
                request,
                gettext("This broadcast is cancelled: its failed chunks stay as they are."),
                messages.WARNING,
            )
        else:
            self.message_user(
                request, gettext("This broadcast has no failed chunks now."), messages.INFO
            )
        return HttpResponseRedirect(
            reverse("admin:notifications_broadcast_change", args=[broadcast.pk])
        )

    def cancel_view(self, request, object_id):
        """Cancel, asked once more first: the confirmation posts back with confirmed=yes."""
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        broadcast = self.get_object(request, unquote(object_id))
        if broadcast is None:
            raise Http404
        page = reverse("admin:notifications_broadcast_change", args=[broadcast.pk])
        if request.POST.get("confirmed") != "yes":
            return TemplateResponse(
                request,
                "admin/notifications/confirm_cancel_broadcast.html",
                {
                    **self.admin_site.each_context(request),
                    "title": gettext("Cancel this broadcast?"),
                    "broadcast": broadcast,
                    "expanded_of_total": self.expanded_of_total(broadcast),
                    "back": page,
                    "opts": self.opts,
                    "original": broadcast,
                },
            )
        counts = broadcasts.cancel_broadcast(broadcast)
        if broadcast.cancelled_at is not None:
            self.message_user(
                request,
                gettext("This broadcast was already cancelled, on %(when)s.")
                % {"when": moment(broadcast.cancelled_at)},
                messages.INFO,
            )
            if not counts.cancelled:
                return HttpResponseRedirect(page)
        else:
            self.log_change(request, broadcast, BROADCAST_CANCELLED)
        said = gettext(
            "Broadcast cancelled. Deliveries withdrawn: %(cancelled)s; in flight, left to "
            "finish: %(in_flight)s; already finished: %(finished)s; maybe sent already (a "
            "drain claimed them and went quiet): %(maybe_sent)s."
        ) % {
            "cancelled": grouped(counts.cancelled),
            "in_flight": grouped(counts.in_flight),
            "finished": grouped(counts.finished),
            "maybe_sent": grouped(counts.maybe_sent),
        }
        uncertain = counts.in_flight or counts.maybe_sent
        self.message_user(request, said, messages.WARNING if uncertain else messages.SUCCESS)
        return HttpResponseRedirect(page)
