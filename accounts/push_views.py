"""The preference centre's web push endpoints: the page's script posts the browser's
PushSubscription.toJSON() here to turn push on for that browser, and its endpoint to turn it
off. JSON in, JSON out, every refusal a 4xx with {"error": …} a person can read."""

from __future__ import annotations

import json
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core import ratelimit
from core.middleware import body_limit
from recipients import subscriptions

# toJSON() of a subscription is about 700 bytes with a long endpoint; 4 KB leaves room and
# keeps what a hostile client can make the server parse small.
MAX_BODY_BYTES = 4096
# Subscribing resolves the endpoint's host name: a user may not make the server do that
# without bound. A browser subscribes once, and again only when its subscription changes.
LIMIT = 30
LIMIT_WINDOW = timedelta(minutes=10)
# The endpoint this session subscribed, which signing out of it turns off.
SESSION_ENDPOINT = "push_endpoint"


def _too_large() -> str:
    return _("The request is larger than %(limit)d bytes.") % {"limit": MAX_BODY_BYTES}


def _refusal(request, verdict) -> JsonResponse:
    return ratelimit.refuse(
        retry_after_seconds=verdict.retry_after_seconds,
        message=_("Too many push subscription changes from here. Try again in a few minutes."),
    )


def _endpoint(view=None, *, counted: bool = True):
    """POST only, a bounded JSON object for a body (handed to view), counted per signed-in
    user; JSON errors for the anonymous and for any body that is not one.

    The count is the user's, and taken only once the request has passed CSRF and sign-in: a
    count per client address, taken first, would let any page a visitor opens (or anyone
    behind the same NAT) spend it for them with forged requests that are refused anyway.
    counted=False counts nothing, for a question that costs what a page view does."""
    if view is None:
        return lambda view: _endpoint(view, counted=counted)

    def guarded(request):
        if not request.user.is_authenticated:
            return JsonResponse({"error": _("Sign in to change push notifications.")}, status=403)
        if counted:
            verdict = ratelimit.hit(
                key=f"push-{view.__name__}:{request.user.pk}", limit=LIMIT, window=LIMIT_WINDOW
            )
            if not verdict.allowed:
                return _refusal(request, verdict)
        try:
            body = _json_body(request)
        except BadRequest as exc:
            return _error(str(exc))
        return view(request, body)

    guarded.__name__ = guarded.__qualname__ = view.__name__
    guarded.__doc__ = view.__doc__
    return body_limit(max_bytes=MAX_BODY_BYTES, message=_too_large)(require_POST(guarded))


class BadRequest(Exception):
    pass


def _json_body(request) -> dict:
    content_type = request.content_type or ""
    if content_type != "application/json":
        raise BadRequest(_("Send the subscription as application/json."))
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadRequest(_("The request body is not valid JSON.")) from None
    if not isinstance(body, dict):
        raise BadRequest(_("The request body must be a JSON object."))
    return body


def _error(message: str, *, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@_endpoint
def subscribe(request, body: dict):
    """Turn push on for the browser whose PushSubscription.toJSON() is the body."""
    keys = body.get("keys")
    if not isinstance(keys, dict):
        return _error(_("The subscription has no keys (p256dh and auth)."))
    try:
        address = subscriptions.subscribe(
            request.user,
            endpoint=body.get("endpoint"),
            p256dh=keys.get("p256dh"),
            auth=keys.get("auth"),
            user_agent=request.headers.get("User-Agent", ""),
        )
    except ValidationError as exc:
        return _error(" ".join(exc.messages))
    # Signing out of this session turns it off again (accounts/signals.py): on a shared
    # computer, the next person to sign in does not get the last one's notifications.
    request.session[SESSION_ENDPOINT] = address.address
    return JsonResponse({"subscribed": True, "id": address.pk})


@_endpoint
def unsubscribe(request, body: dict):
    """Turn push off for the browser whose endpoint is the body's "endpoint"."""
    endpoint = body.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        return _error(_("The request names no endpoint."))
    removed = subscriptions.unsubscribe(request.user, endpoint=endpoint)
    return JsonResponse({"subscribed": False, "removed": removed})


@_endpoint(counted=False)
def status(request, body: dict):
    """Whether the server sends this user's pushes to the browser's endpoint, the body's
    "endpoint": the browser may still hold one that another user, or nobody, has now."""
    endpoint = body.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        return _error(_("The request names no endpoint."))
    return JsonResponse({"subscribed": subscriptions.owns(request.user, endpoint=endpoint)})
