"""Audiences in the staff console: each one's kind and size, its members a page at a time, and
for a static one Import CSV on its page and Remove on its members' page (recipients/audiences.py
does the work)."""

from __future__ import annotations

import time

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext, ngettext_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from core.admin_wording import Worded
from recipients import audiences
from recipients.models import Audience, AudienceKind

# The list counts each audience's members up to this many, then says "more than": a count of
# every active user on each visit of the list is a scan of the user table.
COUNTED_UP_TO = 100_000
MEMBERS_PER_PAGE = 100


class ImportForm(forms.Form):
    file = forms.FileField(
        label=_("CSV file"),
        help_text=_(
            "One user a line, by username or email, in the first column or under a header "
            "named username or email. UTF-8."
        ),
    )


class AudienceForm(forms.ModelForm):
    class Meta:
        model = Audience
        fields = ("name", "key", "kind", "group", "registered_name", "description")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The names registered in this process (recipients/audiences.py, register()), and the
        # one stored, should its registration be gone: shown rather than lost on save.
        names = set(audiences.REGISTERED) | {self.instance.registered_name} - {""}
        self.fields["registered_name"] = forms.ChoiceField(
            label=Audience._meta.get_field("registered_name").verbose_name,
            help_text=Audience._meta.get_field("registered_name").help_text,
            choices=[("", "---------"), *((name, name) for name in sorted(names))],
            required=False,
        )


@admin.register(Audience)
class AudienceAdmin(Worded, admin.ModelAdmin):
    list_title = _("Select an audience to view")
    view_title = _("View audience")
    change_list_title = _("Select an audience to change")
    change_title = _("Change audience")
    add_title = _("Add audience")
    search_title = _("Search audiences")
    counted = ngettext_lazy("%(number)s audience", "%(number)s audiences", "count")
    select_all = _("Select all %(number)s audiences")
    list_display = ("name", "key", "kind", "size", "members_link")
    list_filter = ("kind",)
    search_fields = ("name", "key", "description")
    form = AudienceForm
    prepopulated_fields = {"key": ("name",)}
    fields = (
        "name",
        "key",
        "kind",
        "group",
        "registered_name",
        "description",
        "size",
        "members_link",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("size", "members_link", "created_at", "updated_at")
    change_form_template = "admin/recipients/audience_change_form.html"

    def get_urls(self):
        return [
            path(
                "<int:object_id>/members/",
                self.admin_site.admin_view(self.members_view),
                name="recipients_audience_members",
            ),
            path(
                "<int:object_id>/members/remove/",
                self.admin_site.admin_view(require_POST(self.remove_members_view)),
                name="recipients_audience_members_remove",
            ),
            path(
                "<int:object_id>/import/",
                self.admin_site.admin_view(self.import_view),
                name="recipients_audience_import",
            ),
            *super().get_urls(),
        ]

    @admin.display(description=_("members"))
    def size(self, obj):
        if obj.pk is None:
            return self.get_empty_value_display()
        try:
            counted = audiences.size(obj, at_most=COUNTED_UP_TO)
        except LookupError:
            return gettext("no queryset registered as %(name)s") % {"name": obj.registered_name}
        number = formats.number_format(min(counted, COUNTED_UP_TO), force_grouping=True)
        if counted > COUNTED_UP_TO:
            return gettext("more than %(count)s") % {"count": number}
        return number

    @admin.display(description=_("who they are"))
    def members_link(self, obj):
        if obj.pk is None:
            return self.get_empty_value_display()
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:recipients_audience_members", args=[obj.pk]),
            gettext("List the members"),
        )

    def _audience(self, request, object_id: int) -> Audience:
        audience = self.get_object(request, str(object_id))
        if audience is None:
            raise Http404
        return audience

    def members_view(self, request, object_id: int):
        """The audience's members, a page at a time: it only reads (Remove posts to
        remove_members_view)."""
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        audience = self._audience(request, object_id)
        if not self.has_view_or_change_permission(request, audience):
            raise PermissionDenied
        try:
            found = audiences.members(audience).order_by("username")
        except LookupError as exc:
            raise Http404(str(exc)) from exc
        page = Paginator(
            found.only("username", "email", "first_name", "last_name"), MEMBERS_PER_PAGE
        ).get_page(request.GET.get("page"))
        return TemplateResponse(
            request,
            "admin/recipients/audience_members.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "original": audience,
                "title": gettext("Members of %(audience)s") % {"audience": audience.name},
                "page": page,
                "may_remove": (
                    audience.kind == AudienceKind.STATIC
                    and self.has_change_permission(request, audience)
                ),
            },
        )

    def remove_members_view(self, request, object_id: int):
        """Remove the members ticked on the members' page from a static audience, and go back
        to the page they were ticked on."""
        audience = self._audience(request, object_id)
        if not self.has_change_permission(request, audience):
            raise PermissionDenied
        if audience.kind != AudienceKind.STATIC:
            raise Http404
        # Ids only: a value that is not one names nobody, and is left out.
        ids = sorted({int(v) for v in request.POST.getlist("user") if v.isascii() and v.isdigit()})
        back = reverse("admin:recipients_audience_members", args=[audience.pk])
        page = request.POST.get("page", "")
        if page.isascii() and page.isdigit():
            back += f"?page={page}"
        if not ids:
            self.message_user(request, gettext("Tick the members to remove."), messages.WARNING)
            return HttpResponseRedirect(back)
        removed = audiences.remove(audience, ids)
        if removed:
            self.log_change(
                request, audience, [{"changed": {"fields": [gettext("members (removed)")]}}]
            )
            said = ngettext("%(n)s member removed.", "%(n)s members removed.", removed) % {
                "n": formats.number_format(removed, force_grouping=True)
            }
            self.message_user(request, said, messages.SUCCESS)
        if left := len(ids) - removed:
            said = ngettext(
                "%(n)s of the users ticked was no longer a member.",
                "%(n)s of the users ticked were no longer members.",
                left,
            ) % {"n": formats.number_format(left, force_grouping=True)}
            self.message_user(request, said, messages.WARNING)
        return HttpResponseRedirect(back)

    def import_view(self, request, object_id: int):
        """Import CSV: add the users a file names to a static audience, and show the report."""
        audience = self._audience(request, object_id)
        if not self.has_change_permission(request, audience):
            raise PermissionDenied
        if audience.kind != AudienceKind.STATIC:
            raise Http404
        report = seconds = None
        form = ImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            started = time.monotonic()
            try:
                report = audiences.import_csv(audience, form.cleaned_data["file"])
            except audiences.ImportRefused as exc:
                form.add_error("file", str(exc))
            else:
                seconds = time.monotonic() - started
                self.log_change(
                    request,
                    audience,
                    [{"changed": {"fields": [gettext("members (CSV import)")]}}],
                )
                self.message_user(
                    request,
                    gettext(
                        "%(lines)s lines read: %(added)s members added, %(already)s already "
                        "members, %(unmatched)s not matched."
                    )
                    % {
                        "lines": report.lines,
                        "added": report.added,
                        "already": report.already_members,
                        "unmatched": report.not_matched,
                    },
                    messages.WARNING if report.not_matched else messages.SUCCESS,
                )
        return TemplateResponse(
            request,
            "admin/recipients/audience_import.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "original": audience,
                "title": gettext("Import members of %(audience)s") % {"audience": audience.name},
                "form": form,
                "report": report,
                "seconds": seconds,
                "more_unmatched": report.not_matched - len(report.unmatched_lines) if report else 0,
                "more_invalid": report.invalid - len(report.invalid_lines) if report else 0,
            },
        )
