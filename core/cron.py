"""The cron triggers' door: Authorization: Bearer <CRON_SECRET>, wrong secrets limited.

Shared by every /cron/… endpoint (the drain, the jobs), so a client's wrong guesses count
together whichever endpoint it tries, and one rule decides who may trigger work.
"""

from __future__ import annotations

import functools
import hmac
from datetime import timedelta

from django.conf import settings
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from core import clients, ratelimit

# Calls of one endpoint a minute, whoever makes them with the right secret.
CRON_LIMIT = 12
CRON_WINDOW = timedelta(minutes=1)
# Wrong secrets per client, a quarter hour, before they are answered 429 instead of 401.
GUESS_LIMIT = 5
GUESS_WINDOW = timedelta(minutes=15)


def refusal(request) -> HttpResponse | None:
    """None when request carries the cron secret; otherwise the answer to give it (401, or
    429 after GUESS_LIMIT wrong ones). Raises Http404 while CRON_SECRET is unset."""
    secret = settings.CRON_SECRET
    if not secret:
        raise Http404("The cron trigger is off: CRON_SECRET is not set.")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), secret.encode()):
        return None
    # Wrong secrets are limited per client. The right one is never refused: a limit that
    # could refuse it would let anyone who shares the cron's address (every caller, behind a
    # proxy not yet configured) keep the real cron out with a few bad requests, and a secret
    # of 32 or more random characters is not guessed five at a time anyway.
    guesses = ratelimit.hit(
        key=f"cron-guess:{clients.address(request)}", limit=GUESS_LIMIT, window=GUESS_WINDOW
    )
    if not guesses.allowed:
        return ratelimit.refuse(
            message=f"Too many wrong secrets from this address; try again in "
            f"{guesses.retry_after_seconds} s.",
            retry_after_seconds=guesses.retry_after_seconds,
        )
    return JsonResponse(
        {"error": "Send the cron secret as 'Authorization: Bearer <CRON_SECRET>'."},
        status=401,
        headers={"WWW-Authenticate": 'Bearer realm="cron"'},
    )


def endpoint(*, key: str, what: str):
    """Make a view a /cron/… endpoint: a machine's call by its bearer secret, not a browser
    form, so no CSRF token; GET as well as POST (Vercel's cron, and many schedulers, only
    GET); the view runs only for the right secret and while key is under CRON_LIMIT (what
    names its calls in the 429)."""

    def decorate(view):
        @csrf_exempt
        @require_http_methods(["GET", "POST"])
        @functools.wraps(view)
        def guarded(request, *args, **kwargs):
            refused = refusal(request) or over_limit(key=key, what=what)
            return refused or view(request, *args, **kwargs)

        return guarded

    return decorate


def over_limit(*, key: str, what: str) -> HttpResponse | None:
    """The 429 once key has been called CRON_LIMIT times this minute, else None."""
    verdict = ratelimit.hit(key=key, limit=CRON_LIMIT, window=CRON_WINDOW)
    if verdict.allowed:
        return None
    return ratelimit.refuse(
        message=f"At most {CRON_LIMIT} {what} a minute; try again in "
        f"{verdict.retry_after_seconds} s.",
        retry_after_seconds=verdict.retry_after_seconds,
    )
