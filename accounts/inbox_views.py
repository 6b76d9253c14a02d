"""The signed-in user's inbox: its page, the actions on its entries, and its state for the
live updates.

The page and its actions follow the preference centre's pattern (accounts/views.py): each
action is a form that htmx posts and answers with the partial it changed (accounts/inbox.html),
and that posts the whole page without JavaScript, answered with a redirect back and a message.

The state is a conditional GET that answers 304 while nothing changed, so a poll costs one
indexed statement and no body."""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.translation import get_language, gettext
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django.views.decorators.http import condition, require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect

from core import ratelimit
from notifications import inbox

STATE_WINDOW = timedelta(minutes=1)


def _state_etag(request) -> str | None:
    # Read once: the view answers from what the tag was made of.
    if not request.user.is_authenticated:
        return None
    request.inbox_state = inbox.state(request.user)
    return request.inbox_state.etag


def _private(response):
    # The browser asks again every time (no-cache), and nothing shared keeps a user's count.
    patch_cache_control(response, private=True, no_cache=True)
    patch_vary_headers(response, ["Cookie"])
    return response


@require_safe
def state(request):
    """{"unread", "badge", "newest"} of the signed-in user's inbox, tagged with its ETag."""
    if not request.user.is_authenticated:
        return _private(JsonResponse({"error": _("Sign in to see your inbox.")}, status=403))
    # Per account, not per client: a session's cookie can be copied to any number of
    # addresses, each within nginx's per-client limits.
    verdict = ratelimit.hit(
        key=f"inbox-state:{request.user.pk}",
        limit=settings.INBOX_STATE_POLLS_PER_MINUTE,
        window=STATE_WINDOW,
    )
    if not verdict.allowed:
        refusal = ratelimit.refuse(
            message=_("Your inbox was asked for too often; the page asks again in %(seconds)d s.")
            % {"seconds": verdict.retry_after_seconds},
            retry_after_seconds=verdict.retry_after_seconds,
        )
        return _private(refusal)
    return _private(_answer(request))


@condition(etag_func=_state_etag)
def _answer(request):
    current = request.inbox_state
    return JsonResponse(
        {
            "unread": current.unread,
            "badge": inbox.badge(current.unread),
            "newest": str(current.newest) if current.newest else None,
        }
    )


# --- The inbox page and its actions -----------------------------------------------------------

INBOX_TEMPLATE = "accounts/inbox.html"

DONE = {
    "read": _lazy("Marked as read."),
    "unread": _lazy("Marked as unread."),
    "archive": _lazy("Archived. It is no longer in your inbox."),
}
ACTIONS = {"read": inbox.mark_read, "unread": inbox.mark_unread, "archive": inbox.archive}


def _cursor(text: str | None) -> inbox.Cursor | None:
    """The cursor in a query or form field; None when absent, BadCursor when malformed
    (Cursor.parse takes only the at most 50 characters str() writes)."""
    return inbox.Cursor.parse(text) if text else None


def _posted_page(request) -> inbox.Cursor | None:
    """The page a form was posted from (its before field), or the first when it names none."""
    try:
        return _cursor(request.POST.get("before"))
    except inbox.BadCursor:
        return None


def _region(request, before: inbox.Cursor | None) -> dict:
    """What the inbox region shows: one page of entries from before, and the newest entry the
    reader is shown (what "Mark all read" marks through)."""
    language = get_language()
    shown = inbox.page(request.user, language=language, before=before)
    if before is None:
        newest = shown.entries[0].cursor if shown.entries else None
    else:
        # An older page: the reader came from the newer ones, so "all" reaches the newest.
        newest = inbox.state(request.user).newest
    return {
        "title": _lazy("Inbox"),
        "entries": shown.entries,
        "older": shown.next,
        "before": before,
        "newest": newest,
    }


def _refused(request, message: str, *, fragment: bool):
    template = f"{INBOX_TEMPLATE}#refused" if fragment else INBOX_TEMPLATE
    context = {"title": _lazy("Inbox"), "refused": message}
    return _private(render(request, template, context, status=400))


@login_required
@require_safe
def page(request):
    """The signed-in user's inbox, newest first, a page at a time from ?before=<cursor>.
    ?fragment=entries (or an htmx request) answers only the page's entries, for "load more"
    and for the live script, which merges the new ones in at the top."""
    fragment = request.GET.get("fragment") == "entries" or bool(request.htmx)
    try:
        before = _cursor(request.GET.get("before"))
    except inbox.BadCursor:
        message = gettext("This page of your inbox does not exist. Start again from the newest.")
        return _refused(request, message, fragment=fragment)
    context = _region(request, before)
    # A user's own page: never kept by anything shared, asked again each time.
    return _private(
        render(request, f"{INBOX_TEMPLATE}#entries" if fragment else INBOX_TEMPLATE, context)
    )


def _back(request) -> str:
    """The inbox page the form was posted from (its ?before= when that is a cursor)."""
    url = reverse("accounts:inbox")
    before = _posted_page(request)
    return f"{url}?before={before}" if before else url


def _signed_in(view):
    """login_required, but an htmx request whose session ended is told to load the sign-in
    page (HX-Redirect) instead of being answered with it, which htmx would swap into the
    entry or the list."""

    @functools.wraps(view)
    def guarded(request, *args, **kwargs):
        if request.htmx and not request.user.is_authenticated:
            return HttpResponseClientRedirect(redirect_to_login(reverse("accounts:inbox")).url)
        return login_required(view)(request, *args, **kwargs)

    return guarded


def _act(name: str):
    @require_POST
    @_signed_in
    def act(request, entry_id: uuid.UUID):
        if not ACTIONS[name](request.user, entry_id):
            raise Http404(gettext("You have no such notification."))
        if not request.htmx:
            messages.success(request, DONE[name])
            anchor = "" if name == "archive" else f"#entry-{entry_id}"
            return redirect(_back(request) + anchor)
        context = {"done": DONE[name], "badge_update": True, "single": True}
        entry = None
        if name != "archive":
            entry = inbox.entry(request.user, entry_id, language=get_language())
        if entry is None:
            # Archived (here, or in another tab between the mark and this read): it leaves.
            return render(request, f"{INBOX_TEMPLATE}#archived", context)
        return render(request, f"{INBOX_TEMPLATE}#entry", {**context, "entry": entry})

    act.__name__ = act.__qualname__ = f"inbox_{name}"
    act.__doc__ = f"{name.capitalize()} one of the signed-in user's entries (404 when not theirs)."
    return act


mark_read = _act("read")
mark_unread = _act("unread")
archive = _act("archive")


@require_POST
@_signed_in
def mark_all_read(request):
    """Mark read every unread entry up to through, the newest the reader was shown: one that
    arrived after the page was drawn stays unread. Without through nothing is marked (the
    reader was shown an empty inbox)."""
    try:
        through = _cursor(request.POST.get("through"))
    except inbox.BadCursor:
        message = gettext("This form is out of date; nothing was marked. Try again.")
        return _refused(request, message, fragment=bool(request.htmx))
    if through is not None:
        inbox.mark_all_read(request.user, through=through)
    done = gettext("Everything you were shown is marked read.")
    if not request.htmx:
        messages.success(request, done)
        return redirect(_back(request))
    before = _posted_page(request)
    context = {**_region(request, before), "done": done, "badge_update": True}
    return render(request, f"{INBOX_TEMPLATE}#region", context)
