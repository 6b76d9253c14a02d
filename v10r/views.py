from __future__ import annotations

from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views import defaults
from django.views.decorators.http import require_safe


@require_safe
def home(request):
    return render(request, "home.html")


@require_safe
def favicon(request):
    """/favicon.ico, which browsers and feed readers ask for whatever the page links: the
    icon, at its hashed static URL (a temporary redirect, since that URL changes with it)."""
    return redirect(static("icons/favicon.svg"))


# Django's own error pages, without their requires_csrf_token. That decorator runs the CSRF
# check on the request being reported, and when what failed was reading the request's body (a
# form that is not UTF-8, too many fields), the check reads it again, raises again, and the
# 400 (or 403, 404) becomes a 500. None of these pages has a form.
def bad_request(request, exception):
    return defaults.bad_request.__wrapped__(request, exception)


def permission_denied(request, exception):
    return defaults.permission_denied.__wrapped__(request, exception)


def page_not_found(request, exception):
    return defaults.page_not_found.__wrapped__(request, exception)


def server_error(request):
    return defaults.server_error.__wrapped__(request)
