"""The site's URLs and two more, for tests of what a cache may keep: a name shaped like a hashed
static file whose response sets a cookie, and its twin that sets none. (WhiteNoise answers
only for files it collected; any other /static/ path reaches these views.)"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import path

from v10r.urls import urlpatterns as site

WITH_COOKIE = "/static/probe/with-cookie.0123456789ab.txt"
WITHOUT_COOKIE = "/static/probe/without-cookie.0123456789ab.txt"


def probe(request, *, cookie: bool):
    # Cached the way WhiteNoise caches a hashed file: only the cookie tells the two apart.
    response = HttpResponse("probe", content_type="text/plain")
    response["Cache-Control"] = "max-age=315360000, public, immutable"
    if cookie:
        response.set_cookie("probe", "1", samesite="Lax")
    return response


urlpatterns = [
    path(WITH_COOKIE.removeprefix("/"), probe, {"cookie": True}),
    path(WITHOUT_COOKIE.removeprefix("/"), probe, {"cookie": False}),
    *site,
]
