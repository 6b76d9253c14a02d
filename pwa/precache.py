"""What /service-worker.js keeps for offline use: the hashed static files the public pages
load (the Web Worker module and everything it imports included), and the offline page in
each language.

The list starts from ENTRY_POINTS, the files the templates and the page's scripts name, and
follows the relative ES-module imports inside them, so a module added behind an import is
precached without anyone remembering to list it. tests/browser/test_service_worker.py holds
the list to what Chromium actually fetches on those pages.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from functools import lru_cache
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.urls import reverse
from django.utils import translation

ENTRY_POINTS = (
    "css/site.css",
    "icons/favicon.svg",
    "icons/apple-touch-icon.png",
    "icons/icon-192.png",  # the manifest's icons: an installed app opened offline shows them
    "icons/icon-512.png",
    "icons/icon-maskable-512.png",
    "django_htmx/htmx-2.min.js",  # what {% htmx_script %} loads
    "pwa/register.js",
)
# The showcase's pages' scripts, kept only on a site that has the showcase (V10R_SHOWCASES).
SHOWCASE_ENTRY_POINTS = (
    "showcases/workers-page.js",
    "showcases/queue-live.js",
    "showcases/jobs-live.js",
    "showcases/image-analysis.worker.js",  # named in the page's data-worker-url
)
# Its endpoints that answer a visitor's action, never served from the cache.
SHOWCASE_NEVER = ("showcases:analyse", "showcases:queue", "showcases:try")

# import … from "./x.js", import "./x.js", export … from "./x.js", import("./x.js")
IMPORT = re.compile(
    r"""(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}/[^"']+)["']""",
)

SHELL = Path(__file__).with_name("service-worker.js")
POLICY = "pwa/policy.js"


class MissingStaticFile(Exception):
    """A precached file, or a file one of them imports, is not among the static files."""


def _source(name: str) -> str:
    path = finders.find(name)
    if path is None:
        raise MissingStaticFile(f"{name} is not a static file (see pwa/precache.py)")
    return Path(path).read_text(encoding="utf-8")


def static_files() -> list[str]:
    """The static names to precache: the entry points and, for scripts, their imports."""
    seen: list[str] = []
    showcase = SHOWCASE_ENTRY_POINTS if apps.is_installed("showcases") else ()
    queue = [*ENTRY_POINTS, *showcase]
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.append(name)
        if name.endswith((".js", ".mjs")):
            for relative in IMPORT.findall(_source(name)):
                queue.append(posixpath.normpath(posixpath.join(posixpath.dirname(name), relative)))
        elif finders.find(name) is None:
            raise MissingStaticFile(f"{name} is not a static file (see pwa/precache.py)")
    return seen


def offline_urls() -> dict[str, str]:
    """The offline page's URL in each language."""
    urls = {}
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            urls[code] = reverse("offline")
    return urls


@lru_cache(maxsize=1)
def worker_config() -> dict:
    with translation.override(settings.LANGUAGE_CODE):  # paths as the policy compares them
        return _worker_config()


def _worker_config() -> dict:
    """What the service worker is told: its cache's version, what to precache, its policy.

    Built once per process: the static manifest changes only with a deploy, which restarts it.
    The version is a digest of everything the worker does, so any change to the list, the
    policy or the worker's own code makes new bytes, which browsers install as an update."""
    # Under DEBUG, static URLs are not hashed, and the policy never serves unhashed names from
    # the cache: only the offline pages are worth keeping.
    files = [] if settings.DEBUG else [staticfiles_storage.url(n) for n in static_files()]
    offline = offline_urls()
    languages = [code for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE]
    config = {
        "precache": files,
        "offline": offline,
        "policyUrl": staticfiles_storage.url(POLICY),
        "policy": {
            "staticUrl": settings.STATIC_URL,
            "languages": languages,
            "offlinePath": offline[settings.LANGUAGE_CODE],
            "never": [
                "/admin/",
                "/cron/",
                *(reverse(name) for name in SHOWCASE_NEVER if apps.is_installed("showcases")),
                reverse("service-worker"),
            ],
        },
    }
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode())
    digest.update(SHELL.read_bytes())
    digest.update(_source(POLICY).encode())
    return {"version": digest.hexdigest()[:16], **config}
