"""The browser harness: the site served for real, and Debian's Chromium driving it.

The server is the whole WSGI application in a thread — WhiteNoise, CSP and every middleware,
DEBUG off, static files from the collected, hashed STATIC_ROOT — so the browser sees what a
production visitor sees. Tests that use it get a transactional database: the server thread
only sees committed rows.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from PIL import Image

from tests.helpers import require

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]

# Runs in every page and worker-hosting document before its own scripts, so a violation is
# recorded even when the page's first script is the one refused.
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push({
    directive: event.effectiveDirective,
    blocked: event.blockedURI,
    sample: event.sample,
  });
});
"""


def chromium_path() -> str | None:
    return (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's own parameter name
        pass


class SiteServer:
    """The site on a free loopback port, served from a background thread."""

    def __init__(self) -> None:
        self.httpd = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler, allow_reuse_address=False)
        self.httpd.set_app(WSGIHandler())
        host, port = self.httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def site_server(collected_static) -> Iterator[SiteServer]:
    server = SiteServer()
    yield server
    server.stop()


@pytest.fixture
def site(site_server, transactional_db) -> SiteServer:
    """The running site, for a test whose rows the server thread must see."""
    return site_server


@pytest.fixture(scope="session")
def chromium():
    executable = chromium_path() or require("chromium", install="apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    """A fresh browser tab in its own context that records CSP violations."""
    context = chromium.new_context()
    context.add_init_script(RECORD_CSP_VIOLATIONS)
    tab = context.new_page()
    yield tab
    context.close()


def csp_violations(tab) -> list[dict]:
    """Return the CSP violations the current document has reported so far."""
    return tab.evaluate("window.__cspViolations")


def log_in(tab, site: SiteServer, *, username: str, password: str) -> None:
    """Log in through the admin's own form, as a staff member would."""
    tab.goto(site.url + "/admin/login/")
    tab.fill("#id_username", username)
    tab.fill("#id_password", password)
    tab.click("input[type=submit]")
    tab.wait_for_url(site.url + "/admin/")


def write_small_png(folder) -> str:
    """Write an 80 × 60 lossless PNG, under 720 px: no lane resizes it, so all decode the same
    pixels. Half of it is one red, an eighth one blue, the rest noise."""
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, size=(60, 80, 3), dtype=np.uint8)
    image[:30] = (200, 40, 60)
    image[30:45, :40] = (20, 120, 220)
    path = folder / "small.png"
    Image.fromarray(image).save(path)
    return str(path)


def photo(name: str, **options):
    """Make the decorated function, which draws a photo, a module-scoped fixture of the
    same name whose value is the photo's path: saved once as name in a folder of its own
    (the ending names the format; options go to Pillow's save)."""

    def fixture(draw):
        @pytest.fixture(scope="module", name=draw.__name__)
        def saved(tmp_path_factory) -> str:
            path = tmp_path_factory.mktemp("photos") / name
            draw().save(path, **options)
            return str(path)

        saved.__doc__ = draw.__doc__
        return saved

    return fixture


@pytest.fixture(scope="session")
def small_png(tmp_path_factory) -> str:
    """write_small_png's photo, written once for the session."""
    return write_small_png(tmp_path_factory.mktemp("photos"))


# A reader of the site, not staff: the accounts pages' tests sign in as her.
READER_PASSWORD = "a-long-password-1"


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_user(
        "ada", email="ada@example.com", password=READER_PASSWORD, first_name="Ada"
    )


def in_each_language(words: dict[str, dict[str, str]]):
    """The fixtures prefix (each language's address prefix in turn) and words (what the pages
    say in it, from words), for a test module to bind: `prefix, words = in_each_language(W)`."""

    @pytest.fixture(params=sorted(words), name="prefix")
    def prefix(request) -> str:
        return request.param

    @pytest.fixture(name="words")
    def said(prefix) -> dict[str, str]:
        return words[prefix]

    return prefix, said
