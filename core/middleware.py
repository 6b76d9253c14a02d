"""Four middlewares: request bodies refused by their declared size, requests refused by a
view's rate limit before their body is read, query strings with a NUL refused, and responses
that set a cookie marked private.

Request bodies: Django's CSRF check reads `request.POST`, which parses (and spools to disk)
the whole body, so a limit inside a view comes too late: a 1 GB upload would already sit in a
temporary file. RequestBodyLimitMiddleware runs before it and answers 413 from the
Content-Length alone. Every view gets DATA_UPLOAD_MAX_MEMORY_SIZE (Django's 2.5 MB by
default); a view that takes larger uploads says so with `@body_limit(max_bytes=…)`, and may
word the refusal its own way.

Rate limits: for the same reason, a view whose limit counts requests declares it with
`@rate_limit(…)`, and RateLimitMiddleware counts the hit before the CSRF check: a refused
upload is answered from its headers, its body never parsed. A limit that needs the body (a
price read from the image's headers) stays in the view.

A body nobody read (that refusal, a 404, a CSRF failure without a cookie) is still in the
socket when the answer is ready. gunicorn's gthread worker drains 64 KB of it, then closes the
connection, and closing with unread bytes sends a reset, which the client (or nginx, still
sending the body) may get in place of the answer. So RequestBodyLimitMiddleware reads what
is left in fixed pieces and drops them, unparsed, when the body is within its view's limit:
that costs what carrying the bytes does. Over the limit the answer is a 413 and the
connection closes anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import timedelta
from urllib.parse import unquote_plus

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import JsonResponse
from django.utils.cache import patch_cache_control
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.views.defaults import bad_request

from core import clients, ratelimit

ATTRIBUTE = "request_body_limit"
RATE_LIMIT_ATTRIBUTE = "request_rate_limit"
# An unread body is dropped in pieces of this size: one at a time in memory, none parsed.
# gunicorn receives up to a piece at once; in 64 KB pieces a 19 MB body took 3 times the CPU.
DISCARD_CHUNK = 2**20


def body_limit(*, max_bytes: int, message: Callable[[], str] | None = None) -> Callable:
    """Let the decorated view accept request bodies up to max_bytes.

    message, when given, returns the refusal's text (called per request, so it is translated
    into the request's language)."""

    def decorate(view: Callable) -> Callable:
        setattr(view, ATTRIBUTE, (max_bytes, message))
        return view

    return decorate


def _default_message(limit: int) -> str:
    megabytes = round(limit / 2**20, 1)
    if megabytes.is_integer():
        megabytes = int(megabytes)
    return _("The request is larger than %(limit)s MB.") % {"limit": number_format(megabytes)}


def _declared_length(request) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        # Django reads such a body as empty, so there is nothing to refuse or to discard.
        return 0


def _view_limit(view_func) -> tuple[int | None, Callable[[], str] | None]:
    return getattr(view_func, ATTRIBUTE, (settings.DATA_UPLOAD_MAX_MEMORY_SIZE, None))


class RequestBodyLimitMiddleware:
    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not response.streaming:  # a streaming view may still be reading its body
            discard_unread_body(request)
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        limit, message = _view_limit(view_func)
        if limit is None or _declared_length(request) <= limit:
            return None
        text = message() if message else _default_message(limit)
        return JsonResponse({"error": text}, status=413)


def discard_unread_body(request) -> int:
    """Read and drop what is left of request's body, when it is within the limit of the view
    it reached (Django's default for a request no view took); return how many bytes."""
    match = getattr(request, "resolver_match", None)
    limit, _message = _view_limit(match.func if match else None)
    if limit is None or _declared_length(request) > limit:
        return 0
    dropped = 0
    try:
        # request.read() stops at the declared length (Django's LimitedStream).
        while chunk := request.read(DISCARD_CHUNK):
            dropped += len(chunk)
    except OSError:
        pass  # the client went away: nothing is waiting for the answer either
    return dropped


def rate_limit(
    *,
    name: str,
    limit: int | Callable[[], int],
    window: timedelta | Callable[[], timedelta],
    refusal: Callable,
    methods: Collection[str] = ("POST",),
) -> Callable:
    """Allow each client limit requests in methods to the decorated view per window, counted
    as "name:<client address>" by RateLimitMiddleware before anything reads the body.

    limit and window may be callables, read on each request: a view module's constants then
    stay the one place its limits are set, and a change to them (a test's) reaches the door.
    refusal(request, verdict) returns the answer to a request over the limit (see
    ratelimit.refuse); it must not read request.POST or request.FILES."""

    def decorate(view: Callable) -> Callable:
        setattr(view, RATE_LIMIT_ATTRIBUTE, (name, limit, window, refusal, frozenset(methods)))
        return view

    return decorate


class RateLimitMiddleware:
    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        declared = getattr(view_func, RATE_LIMIT_ATTRIBUTE, None)
        if declared is None:
            return None
        name, limit, window, refusal, methods = declared
        if request.method not in methods:
            return None  # the view answers 405 itself, and such a request costs nothing
        verdict = ratelimit.hit(
            key=f"{name}:{clients.address(request)}",
            limit=limit() if callable(limit) else limit,
            window=window() if callable(window) else window,
        )
        if verdict.allowed:
            return None
        return refusal(request, verdict)


class PrivateCookieResponsesMiddleware:
    """Mark every response that sets a cookie `Cache-Control: private, no-store`.

    No script may read Set-Cookie: the Fetch standard takes it out of every response a page
    or a service worker is handed. A cache in the browser (the service worker's) cannot tell
    such a response from a shared one by its cookie, then, but it can read Cache-Control. So
    the server says it here, once for every view, and the worker's policy keeps nothing that
    says private or no-store. A response that sets a cookie is one visitor's (a CSRF token,
    a session) and must not be kept by any shared cache either, as RFC 9111 has it.
    """

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.cookies:
            patch_cache_control(response, private=True, no_store=True)
        return response


class NulInQueryMiddleware:
    """Answer 400 to a query string that carries a NUL character.

    PostgreSQL text cannot hold NUL, so any view that filters on such a value (every admin
    list filter, any search) would fail in the database with a 500. Django's form fields
    refuse NUL in what they clean, but a query string reaches querysets without a form; one
    check here covers every view. Only the query string: bodies go through forms, or are files.
    """

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in unquote_plus(request.META.get("QUERY_STRING", "")):
            return bad_request(request, SuspiciousOperation("NUL in the query string"))
        return self.get_response(request)
