"""An email's unsubscribe link (RFC 8058): /unsubscribe/<token>/, and /ru/…, /de/… in the
language the email was written in.

A GET shows what the link would do and a button; it changes nothing, since mail scanners and
link previews fetch every link in an email. A POST, from that button or from the mail
provider's own "Unsubscribe" (body `List-Unsubscribe=One-Click`, no cookies), turns the
token's category off on its channel. The token (recipients/tokens.py) is the whole
credential: no sign-in, no session. See docs/unsubscribe.md.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

import transports as channels
from core import clients, ratelimit
from recipients import preferences, tokens
from recipients.catalogue import CATEGORIES

# Refused tokens a client may send before it is refused for a while: a person who pasted a
# link cut short tries a few times; nobody needs more. Only refusals count, so a mail
# provider's one-click POSTs, all from its few servers, are never counted together.
REFUSED_PER_CLIENT = 20
REFUSED_WINDOW = timedelta(minutes=15)
# Changes one token may make per window, whoever sends it: each needs the recipient to have
# turned the category back on since, so only a recipient toggling it over and over meets the
# limit. A POST that changes nothing (a provider's retry, a second click) is not counted.
POSTS_PER_TOKEN = 10
POSTS_WINDOW = timedelta(hours=1)


# CSRF-exempt, safely: a forged cross-site POST needs the token, and whoever has the token
# may make this change anyway (it is the credential, as the reset link's token is). The POST
# comes from mail providers' servers, which have no CSRF cookie to send, and uses no session.
@csrf_exempt
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def unsubscribe(request, token: str):
    try:
        user_id, category, channel = tokens.verify(token)
        user = get_user_model()._default_manager.filter(pk=user_id).first()
    except tokens.TokenRefused:
        user = None
    if user is None:
        # A deleted user's token is refused the same way: it names nobody any more.
        return _refused(request)
    context = {
        "title": _("Unsubscribe"),
        "category": CATEGORIES[category].label,
        "channel": in_sentence(channel),
    }
    if request.method == "POST":
        already = not preferences.of(user).enabled(category, channel)
        if not already:
            # Only a POST that changes something is counted: a replay of an unsubscribe that
            # has happened writes nothing, and must not use up the budget of the recipient's
            # own one-click POST after they turn the category back on.
            verdict = ratelimit.hit(
                key=f"unsubscribe:{user_id}:{category}:{channel}",
                limit=POSTS_PER_TOKEN,
                window=POSTS_WINDOW,
            )
            if not verdict.allowed:
                return ratelimit.refuse(
                    retry_after_seconds=verdict.retry_after_seconds,
                    response=render(request, "accounts/unsubscribe_busy.html", context),
                )
            try:
                preferences.choose(user, choices={(category, channel): False})
            except ValidationError:
                # The token's names are checked against the same lists: only a change of
                # them between the check and here reaches this.
                return _refused(request)
        return render(request, "accounts/unsubscribed.html", {**context, "already": already})
    context["already"] = not preferences.of(user).enabled(category, channel)
    return render(request, "accounts/unsubscribe.html", context)


def in_sentence(name: str) -> str:
    """How the page names the channel configured as name, mid-sentence ("by email"), or its
    name when the site no longer runs it."""
    channel = channels.get(name)
    return channel.shown_in_sentence if channel is not None else name


def _refused(request):
    """400 for a token this site did not sign as it stands, counted by the client."""
    verdict = ratelimit.hit(
        key=f"unsubscribe-refused:{clients.address(request)}",
        limit=REFUSED_PER_CLIENT,
        window=REFUSED_WINDOW,
    )
    context = {"title": _("This unsubscribe link does not work")}
    response = render(request, "accounts/unsubscribe_refused.html", context, status=400)
    if not verdict.allowed:
        return ratelimit.refuse(retry_after_seconds=verdict.retry_after_seconds, response=response)
    return response
