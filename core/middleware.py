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

A body nobody read (a 404, a CSRF failure without a cookie) is still in the socket when the
answer is ready. gunicorn's gthread worker drains 64 KB of it, then closes the connection, and
closing with unread bytes sends a reset, which a client still sending the body may get in
place of the answer. So RequestBodyLimitMiddleware reads what is left in fixed pieces and
drops them, unparsed, when the body is within its view's limit: that costs what carrying the
bytes does. Over the limit the answer is a 413 and the connection closes anyway.

A rate limit's refusal is the exception: carrying a refused photo's 19 MB took three times
the server's CPU of not reading it (bench/refused_upload.py), and a refused client may send
it again at once. Its body is never read. A body of at most 64 KB gunicorn drains itself and
the connection goes on; past that the connection ends after the answer. The answer cannot say
`Connection: close` itself: that header is the server's (PEP 3333 forbids it to an
application; gunicorn drops it, wsgiref fails the response). Left to itself, gunicorn would
drain 64 KB and close, and a close with unread bytes is a reset, which nginx, still sending
the body, met before it had read the answer about once in a hundred refusals on a busy
machine (a 502). So under gunicorn, once the answer is written, the refusal ends the
connection itself: a FIN after the answer, then what nginx still sends is dropped by the
kernel, never copied, until nginx, having read the answer, closes (drop_until_peer_closes:
milliseconds, and the 4 MB or so nginx had sent on). The development server reads the rest
of the body itself.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
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
# Set on a rate limit's refusal, whose body is never read (not dropped here either).
LEAVE_BODY_ATTRIBUTE = "request_body_left_to_server"
# How long a refusal's thread drops what the peer sends once the answer is written, waiting
# for it to close: nginx closes within milliseconds; a client that sends its whole body before
# it reads an answer closes only once it has sent it.
PEER_CLOSE_SECONDS = 1.0
# What gunicorn drains of an unread body to keep the connection (gunicorn/http/parser.py): a
# refusal of a smaller body is left to it.
GUNICORN_DRAIN_BYTES = 64 * 1024
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
        # A streaming view may still be reading its body.
        if not response.streaming and not getattr(response, LEAVE_BODY_ATTRIBUTE, False):
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
    as "name:<client address>" by RateLimitMiddleware before anything reads the body; a
    refused request's body is never read (see the module's docstring).

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
        response = refusal(request, verdict)
        # See the module's docstring. Django calls the closers once the server has written
        # the whole answer (gunicorn calls close() after its last write).
        setattr(response, LEAVE_BODY_ATTRIBUTE, True)
        connection = request.META.get("gunicorn.socket")
        length = _declared_length(request)
        if connection is not None and length > GUNICORN_DRAIN_BYTES:
            response._resource_closers.append(
                lambda: drop_until_peer_closes(
                    connection, max_bytes=length, seconds=PEER_CLOSE_SECONDS
                )
            )
        return response


def drop_until_peer_closes(connection: socket.socket, *, max_bytes: int, seconds: float) -> int:
    """Tell the peer of connection that nothing more comes (a FIN, after the answer), then
    drop what it still sends until it closes, max_bytes or seconds; return how many bytes.

    The bytes are dropped by the kernel, never copied out (MSG_TRUNC, Linux's TCP): nginx
    stops sending once it has read the answer, and closes; its FIN comes after what it had
    sent, so only dropping that lets the FIN arrive. Elsewhere nothing is done."""
    if not sys.platform.startswith("linux"):
        return 0
    dropped = 0
    timeout = connection.gettimeout()
    try:
        connection.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + seconds
        while dropped < max_bytes and (left := deadline - time.monotonic()) > 0:
            connection.settimeout(left)
            # The length of what was dropped: with MSG_TRUNC nothing is written to the buffer.
            taken = len(connection.recv(min(DISCARD_CHUNK, max_bytes - dropped), socket.MSG_TRUNC))
            if not taken:
                break
            dropped += taken
    except OSError:
        pass  # reset, timed out, or closed already: the answer was written before
    finally:
        with contextlib.suppress(OSError):
            connection.settimeout(timeout)
    return dropped


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
