from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from pwa import icons, precache

KILL_SWITCH = Path(__file__).with_name("kill-switch.js")
# The mark's blue for an installed app's title bar and splash; the pages set their own
# theme-color per colour scheme (templates/base.html), matching their backgrounds.
BRAND = "#0b57d0"
SPLASH = "#fbfaf7"  # site.css --bg, light


@lru_cache(maxsize=2)
def worker_source(enabled: bool) -> str:
    if not enabled:
        return KILL_SWITCH.read_text(encoding="utf-8")
    config = json.dumps(precache.worker_config(), sort_keys=True, indent=1)
    return f"const CONFIG = {config};\n\n{precache.SHELL.read_text(encoding='utf-8')}"


@require_safe
def service_worker(request):
    """The service worker, at the root so that its scope is the whole site.

    no-cache: a browser asks again on every visit whether the worker changed, so a deploy (or
    the kill switch) reaches it at once instead of after a day."""
    response = HttpResponse(
        worker_source(settings.SERVICE_WORKER_ENABLED),
        content_type="text/javascript; charset=utf-8",
    )
    response["Cache-Control"] = "no-cache"
    return response


@require_safe
def manifest(request):
    """The web app manifest, in the page's language: what an installed v10r is called, how it
    looks, and where it opens."""
    home = reverse("home")
    body = {
        "id": "/",
        "name": _("v10r: workers, made concrete"),
        "short_name": "v10r",
        "description": _(
            "Workers, made concrete: a queue worker and a browser Web Worker, running for real."
        ),
        "lang": get_language(),
        "dir": "ltr",
        "start_url": home,
        "scope": "/",
        "display": "standalone",
        "background_color": SPLASH,
        "theme_color": BRAND,
        "icons": [
            {
                "src": static(icon.path),
                "sizes": f"{icon.size}x{icon.size}",
                "type": icon.mime_type,
                "purpose": icon.purpose,
            }
            for icon in icons.ICONS
        ],
    }
    response = JsonResponse(body, json_dumps_params={"ensure_ascii": False, "indent": 1})
    response["Content-Type"] = "application/manifest+json"
    response["Cache-Control"] = "public, max-age=3600"
    return response


@require_safe
def offline(request):
    """The page a navigation falls back to without a network (precached by the worker)."""
    return render(request, "pwa/offline.html")
