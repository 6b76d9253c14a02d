"""Failed sign-ins, counted in the site's rate limiter: one implementation for every form that
checks a password (the admin's login, the site's sign-in, the old password of a change).

The limiter is the PostgreSQL one every other limit uses, so the count holds across processes
and hosts, and the client is identified the same way (core/clients.py), which is why this is
not django-axes: that would bring its own tables, middleware and notion of the client address
for a form or two. Both forms charge the same keys, so failures on one count on the other.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from core import clients, ratelimit

# Wrong sign-ins before the form refuses to check passwords for a while. Per client address
# (an IPv6 /64), which stops one guesser; and per username, higher, which slows guessers
# spread over many addresses. The username's count alone never refuses a client that has not
# failed for that username itself in the window: else a few addresses could lock its owner
# out. Past it, each client that has failed gets no more tries, and each new one a single one.
LOGIN_FAILURES_PER_CLIENT = 10
LOGIN_FAILURES_PER_USERNAME = 50
LOGIN_WINDOW = timedelta(minutes=15)

THROTTLED = "throttled"  # the refusal's ValidationError code


class TooManyFailures(Exception):
    """A password check refused before it ran: too many failures. retry_after_seconds says
    when to try again (for a Retry-After header)."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(retry_after_seconds)
        self.retry_after_seconds = retry_after_seconds


def counted[T](*, request, username: str, check: Callable[[], T]) -> T:
    """Run check(), a password check that raises ValidationError when the password is wrong,
    counted as a sign-in attempt of this client on this username; raise TooManyFailures
    instead of running it when either has failed too often."""
    # Counted before the password is checked, or a burst of concurrent guesses would all
    # pass the check before any of them counted. Only a password actually checked and
    # wrong stays counted: a refused attempt takes its hits back (else one client, once
    # refused, could go on charging the username's count), and so does a right one.
    client = clients.address(request)
    username = username.casefold()
    charged = []

    def charge(key: str, limit: int) -> ratelimit.Verdict:
        verdict = ratelimit.hit(key=key, limit=limit, window=LOGIN_WINDOW)
        charged.append(key)
        return verdict

    def refuse(retry_after_seconds: int):
        _forgive(charged)
        raise TooManyFailures(retry_after_seconds)

    # The client first: a client already refused never reaches the username's count.
    by_client = charge(f"login:{client}", LOGIN_FAILURES_PER_CLIENT)
    if not by_client.allowed:
        refuse(by_client.retry_after_seconds)
    by_username = charge(f"login-user:{username}", LOGIN_FAILURES_PER_USERNAME)
    # Allowed while this is the client's first attempt on this username in its window.
    # The hits serialise on the row, so of a burst from one new client only one is.
    first_here = charge(f"login-pair:{client}:{username}", 1)
    if not by_username.allowed and not first_here.allowed:
        # Tried again once either window restarts.
        refuse(min(by_username.retry_after_seconds, first_here.retry_after_seconds))
    result = check()
    _forgive(charged)
    return result


class ThrottledSignInMixin:
    """Put before an AuthenticationForm (or a subclass) in the bases: its clean() is counted.

    A refusal is a ValidationError with the code THROTTLED; retry_after_seconds then says
    when to try again (for a Retry-After header)."""

    retry_after_seconds: int | None = None

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        return self.counted(username, super().clean)

    def counted[T](self, username: str, check: Callable[[], T]) -> T:
        try:
            return counted(request=self.request, username=username, check=check)
        except TooManyFailures as refused:
            self.retry_after_seconds = refused.retry_after_seconds
            raise ValidationError(refusal(refused.retry_after_seconds), code=THROTTLED) from None


def refusal(retry_after_seconds: int) -> str:
    """What a refused sign-in says, in the active language."""
    return _("Too many failed sign-ins. Try again in %(minutes)d min.") % {
        "minutes": -(-retry_after_seconds // 60)
    }


def _forgive(keys: list[str]) -> None:
    for key in keys:
        ratelimit.forgive(key=key)
