"""What the console says about its own lists, as whole sentences per model.

Django builds titles and counts by pasting a model's verbose_name into a phrase ("Select %s to
view", "{{ count }} {{ verbose_name_plural }}"). In Russian the name then stands in the
nominative where the phrase needs another case ("Выберите доставка для просмотра"), and a
count needs one of several plural forms ("12 доставки" for "12 доставок"). Each admin here
says its own sentences instead, each translated whole.
"""

from __future__ import annotations

from django.contrib.admin.views import main
from django.utils import formats
from django.utils.translation import gettext, gettext_noop

# Django 6.1 labels the empty choice of a select (the changelist's action menu) with
# BLANK_CHOICE_LABEL, a lazy gettext of this msgid, but its own ru and de catalogues do not
# have it yet. Our catalogue is consulted first, so a translation there fills the gap; the
# msgid must appear in our source or makemessages would drop it as obsolete.
BLANK_CHOICE_LABEL = gettext_noop("- Select an option -")


class ChangeList(main.ChangeList):
    """Django's changelist, with the count and "select all" said in the admin's words."""

    @property
    def counted(self) -> str:
        """The number of rows, with its noun in the form the number asks for."""
        number = formats.number_format(self.result_count, force_grouping=True)
        if getattr(self.paginator, "estimated", False):
            number = f"≈ {number}"
        elif getattr(self.paginator, "capped", False):
            number = gettext("more than %(count)s") % {"count": number}
        return self.model_admin.counted % {"count": self.result_count, "number": number}

    @property
    def select_all(self) -> str:
        number = formats.number_format(self.result_count, force_grouping=True)
        return self.model_admin.select_all % {"number": number}

    @property
    def search_title(self) -> str:
        return str(self.model_admin.search_title)


class Worded:
    """A ModelAdmin mixin: the titles and counts come from the admin's own sentences.

    An admin sets list_title (its changelist's heading), view_title (a change page's, as
    read-only), search_title, counted (an ngettext_lazy keyed on "count" whose text takes the
    formatted %(number)s) and select_all (shown only when the rows fill more than one page, so
    always a plural; the translations avoid agreeing with the number). An admin whose rows
    staff may edit also sets change_list_title, change_title and add_title: those are shown to
    whoever may change (or add) rows, the view titles to whoever may only look.
    """

    list_title: str
    view_title: str
    search_title: str
    counted: str
    select_all: str
    change_list_title: str | None = None
    change_title: str | None = None
    add_title: str | None = None

    def get_changelist(self, request, **kwargs):
        return ChangeList

    def changelist_title(self, request) -> str:
        if self.change_list_title and self.has_change_permission(request):
            return self.change_list_title
        return self.list_title

    def changeform_title(self, request, object_id) -> str:
        if object_id is None:
            return self.add_title or self.view_title
        if self.change_title and self.has_change_permission(request):
            return self.change_title
        return self.view_title

    def changelist_view(self, request, extra_context=None):
        context = {"title": self.changelist_title(request), **(extra_context or {})}
        return super().changelist_view(request, context)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        context = {"title": self.changeform_title(request, object_id), **(extra_context or {})}
        return super().changeform_view(request, object_id, form_url, context)
