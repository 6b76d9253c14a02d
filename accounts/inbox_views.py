"""The inbox's state for the page's live updates: a conditional GET that answers 304 while
nothing changed, so a poll costs one indexed statement and no body."""

from __future__ import annotations

from django.http import JsonResponse
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.translation import gettext as _
from django.views.decorators.http import condition, require_safe

from notifications import inbox


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
