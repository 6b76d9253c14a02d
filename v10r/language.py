"""The visitor's language: the URL's, once the visitor is on the site; on arrival, their choice,
else their browser's.

English lives at the root and Russian and German under /ru/ and /de/ (v10r/urls.py). Django's
LocaleMiddleware reads a path without a prefix as English whatever the browser asks, so a
visitor whose browser asks for Russian met English first. LanguageMiddleware keeps Django's
reading of the path and adds two things:

- Arrival. A page opened from outside the site (a typed address, a bookmark, another site's
  link) without a prefix is sent to its prefixed twin when the visitor's choice (the language
  cookie) or, without one, their browser's Accept-Language names another of the site's
  languages. The admin is inside the prefixes, so it follows too.
- The choice. Inside the site every link keeps the page's language but the switcher's, so a
  page opened from one of the site's own pages in a language other than the one the visitor
  would arrive in is their choice: the answer stores it in the language cookie, and it wins
  over the browser's from then on. An explicit prefix always wins over both.

Only navigations are steered or remembered (not htmx, fetch() or the service worker's
requests, which ask for the URL they name), and only GET and HEAD: a form's POST is answered
where it was sent. "From the site" is the browser's Sec-Fetch-Site: same-origin, or, where a
browser sends no Sec-Fetch headers (plain HTTP away from localhost), a Referer from this host
(the Referrer-Policy, same-origin, sends it on the site's own links only).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.conf.urls.i18n import is_language_prefix_patterns_used
from django.middleware.locale import LocaleMiddleware
from django.urls import get_script_prefix, is_valid_path
from django.utils import translation
from django.utils.cache import patch_vary_headers

# What the language of an answer to an unprefixed navigation depends on.
VARY = ("Accept-Language", "Cookie", "Sec-Fetch-Site", "Sec-Fetch-Mode")


def _navigation(request) -> bool:
    if request.method not in ("GET", "HEAD") or request.headers.get("HX-Request"):
        return False
    # A browser that sends no Sec-Fetch-Mode (an old one, or over plain HTTP) is navigating.
    return request.headers.get("Sec-Fetch-Mode", "navigate") == "navigate"


def _from_this_site(request) -> bool:
    site = request.headers.get("Sec-Fetch-Site")
    if site:
        return site == "same-origin"
    referer = request.headers.get("Referer", "")
    return bool(referer) and urlsplit(referer).netloc == request.get_host()


def _prefixed_path(request, language: str) -> str | None:
    """The path of request's page in language, when that page exists; else None."""
    urlconf = getattr(request, "urlconf", settings.ROOT_URLCONF)
    path = f"/{language}{request.path_info}"
    # The prefix patterns match the active language's prefix only.
    with translation.override(language):
        if is_valid_path(path, urlconf):
            return path
    return None


def _unprefixed_page(request) -> bool:
    """Whether request asks for a page of the language prefixes, at the root (English)."""
    if translation.get_language_from_path(request.path_info):
        return False
    urlconf = getattr(request, "urlconf", settings.ROOT_URLCONF)
    used, prefixed_default = is_language_prefix_patterns_used(urlconf)
    if not used or prefixed_default:
        return False
    other = next(code for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE)
    return _prefixed_path(request, other) is not None


class LanguageMiddleware(LocaleMiddleware):
    def process_request(self, request):
        super().process_request(request)
        request.unprefixed_page = _unprefixed_page(request)
        if not (request.unprefixed_page and _navigation(request)) or _from_this_site(request):
            return None
        wanted = translation.get_language_from_request(request, check_path=False)
        if wanted == settings.LANGUAGE_CODE:
            return None
        path = _prefixed_path(request, wanted)
        if path is None:
            return None
        script_prefix = get_script_prefix()
        url = request.get_full_path().replace(script_prefix, f"{script_prefix}{wanted}/", 1)
        redirect = self.response_redirect_class(url)
        patch_vary_headers(redirect, VARY)
        return redirect

    def process_response(self, request, response):
        response = super().process_response(request, response)
        if not _navigation(request):
            return response
        if getattr(request, "unprefixed_page", False):
            patch_vary_headers(response, VARY)
        if response.status_code == 200 and _from_this_site(request):
            self._remember(request, response)
        return response

    @staticmethod
    def _remember(request, response) -> None:
        """Store the page's language as the visitor's choice when it is not the language they
        would arrive in (the cookie's, else the browser's)."""
        if not (request.unprefixed_page or translation.get_language_from_path(request.path_info)):
            return  # not one of the pages in three languages
        shown = translation.get_language()
        if shown == translation.get_language_from_request(request, check_path=False):
            return
        response.set_cookie(
            settings.LANGUAGE_COOKIE_NAME,
            shown,
            max_age=settings.LANGUAGE_COOKIE_AGE,
            path=settings.LANGUAGE_COOKIE_PATH,
            domain=settings.LANGUAGE_COOKIE_DOMAIN,
            secure=settings.LANGUAGE_COOKIE_SECURE,
            httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
            samesite=settings.LANGUAGE_COOKIE_SAMESITE,
        )
