"""The service worker in Chromium, on the production static pipeline with the CSP enforced:
install and control, offline, the cache, FLUSH, the update prompt, the kill switch, install."""

from __future__ import annotations

import functools
import re

import pytest

from pwa import precache, views
from tests.browser.conftest import CHROMIUM_ARGS, chromium_path, csp_violations, log_in
from tests.urls import WITH_COOKIE, WITHOUT_COOKIE

pytestmark = pytest.mark.browser

WORKERS = "/showcases/workers/"


WORKER_SOURCE = views.worker_source  # the cached function, whatever a test puts in its place


@pytest.fixture(autouse=True)
def fresh_worker():
    precache.worker_config.cache_clear()
    WORKER_SOURCE.cache_clear()
    yield
    precache.worker_config.cache_clear()
    WORKER_SOURCE.cache_clear()


def controlled(page, site, path: str = "/") -> None:
    """Open path and wait until the worker has installed (precache done) and controls it."""
    page.goto(site.url + path)
    page.wait_for_function("() => navigator.serviceWorker.controller !== null", timeout=30_000)


def cached_urls(page) -> list[str]:
    return page.evaluate(
        """async () => {
            const urls = [];
            for (const name of await caches.keys()) {
                const cache = await caches.open(name);
                for (const request of await cache.keys()) urls.push(new URL(request.url).pathname);
            }
            return urls.sort();
        }"""
    )


def cache_names(page) -> list[str]:
    return page.evaluate("async () => (await caches.keys()).sort()")


def test_the_worker_installs_precaches_and_controls_the_page(site, page):
    controlled(page, site)
    scope = page.evaluate("async () => (await navigator.serviceWorker.ready).scope")
    assert scope == site.url + "/"
    (name,) = cache_names(page)
    assert re.fullmatch(r"v10r-[0-9a-f]{16}", name)
    urls = cached_urls(page)
    assert (
        sorted(precache.worker_config()["precache"] + ["/offline/", "/ru/offline/", "/de/offline/"])
        == urls
    )
    # No page but the offline ones is ever kept.
    assert [url for url in urls if not url.startswith("/static/")] == [
        "/de/offline/",
        "/offline/",
        "/ru/offline/",
    ]
    assert csp_violations(page) == []


def test_the_precache_holds_what_the_public_pages_fetch(site, page, tmp_path):
    """Every same-origin static file the home, workers and offline pages load — the Web Worker
    module and its imports included — is precached, and nothing else is, but the icons an
    installed app shows."""
    fetched = set()
    page.context.on(
        "request",
        lambda request: (
            fetched.add(request.url.removeprefix(site.url))
            if request.url.startswith(site.url + "/static/")
            else None
        ),
    )
    for path in ("/", WORKERS, "/offline/"):
        page.goto(site.url + path)
    page.goto(site.url + WORKERS)
    page.wait_for_selector("#palette-demo[data-ready=true]")
    page.click("[data-sample]")
    page.wait_for_selector("[data-run=worker]:not([disabled])")
    page.click("[data-run=worker]")
    page.wait_for_selector("[data-lane=worker][data-done=true]", timeout=60_000)
    precached = set(precache.worker_config()["precache"])
    icons = {url for url in precached if re.search(r"/icons/icon-", url)}
    # The policy is the worker's own import, kept by the browser with the worker's script.
    fetched.discard(precache.worker_config()["policyUrl"])
    assert fetched - precached == set(), "fetched but not precached"
    assert precached - icons - fetched == set(), "precached but never fetched"


@pytest.mark.parametrize(("prefix", "heading"), [("", "You are offline"), ("/ru", "Нет сети")])
def test_offline_a_navigation_shows_the_offline_page_in_the_visitors_language(
    site, page, prefix, heading
):
    controlled(page, site, prefix + "/")
    page.context.set_offline(True)
    try:
        page.goto(site.url + prefix + WORKERS)
        assert page.text_content("h1") == heading
        assert page.get_attribute("html", "lang") == (prefix.strip("/") or "en")
        assert page.locator("[data-offline-page]").count() == 1
        # Its stylesheet came from the cache too: the page is styled, not bare.
        assert page.evaluate("getComputedStyle(document.body).fontFamily") != "Times New Roman"
        assert csp_violations(page) == []
    finally:
        page.context.set_offline(False)


def test_offline_the_web_worker_lane_still_analyses_a_photo(site, page, tmp_path):
    from PIL import Image

    photo = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (200, 40, 60)).save(photo)
    controlled(page, site, WORKERS)
    page.wait_for_selector("#palette-demo[data-ready=true]")
    page.context.set_offline(True)
    try:
        page.set_input_files("#demo-file", str(photo))
        page.wait_for_selector("[data-run=worker]:not([disabled])")
        page.click("[data-run=worker]")
        page.wait_for_selector("[data-lane=worker][data-done=true]", timeout=60_000)
        hexes = page.eval_on_selector_all(
            "[data-lane=worker] .swatch", "s => s.map(x => x.dataset.hex)"
        )
        assert hexes == ["#c8283c"]
        # The server lane cannot work offline, and says so instead of a bare network error.
        page.click("[data-run=server]")
        error = page.wait_for_selector("[data-error]:not([hidden])", timeout=30_000)
        assert "The server lane needs the network, and this browser is offline." in (
            error.text_content()
        )
        assert csp_violations(page) == []
    finally:
        page.context.set_offline(False)


def test_a_hashed_file_comes_from_the_cache_and_pages_never_do(site, page):
    controlled(page, site)
    responses = []
    page.on("response", lambda response: responses.append(response))
    page.goto(site.url + WORKERS)
    page.wait_for_selector("#palette-demo[data-ready=true]")
    stylesheet = next(
        r for r in responses if re.search(r"/static/css/site\.[0-9a-f]{12}\.css$", r.url)
    )
    assert stylesheet.from_service_worker
    # The page itself went to the server (through the worker, which keeps none of it) ...
    assert WORKERS not in cached_urls(page)
    # ... and the admin is not the worker's business at all: straight to the server.
    responses.clear()
    page.goto(site.url + "/admin/login/")
    (login,) = [r for r in responses if r.url.endswith("/admin/login/")]
    assert not login.from_service_worker
    assert not any("/admin/" in url and not url.startswith("/static/") for url in cached_urls(page))
    # Offline, then, an admin page is simply unreachable: never a stale copy.
    page.context.set_offline(True)
    try:
        with pytest.raises(Exception, match="ERR_INTERNET_DISCONNECTED"):
            page.goto(site.url + "/admin/login/")
    finally:
        page.context.set_offline(False)


@pytest.fixture
def probes(settings):
    """Two hashed-looking static names served by Django: one sets a cookie, one does not."""
    settings.ROOT_URLCONF = "tests.urls"


def test_a_response_that_sets_a_cookie_is_never_kept(site, page, probes):
    controlled(page, site)
    responses = []
    page.on("response", lambda response: responses.append(response))
    page.evaluate(
        "async (urls) => { for (const url of urls) await (await fetch(url)).text(); }",
        [WITH_COOKIE, WITHOUT_COOKIE],
    )
    # Both went through the worker's cache-first path, and the page got the cookie...
    through = {r.url.removeprefix(site.url): r.from_service_worker for r in responses}
    assert through == {WITH_COOKIE: True, WITHOUT_COOKIE: True}
    assert "probe=1" in page.evaluate("document.cookie")
    # ...but only the twin without one was kept (kept in order: the first is settled by then).
    page.wait_for_function(
        "async (url) => !!(await caches.match(url))", arg=WITHOUT_COOKIE, polling=100
    )
    assert WITH_COOKIE not in cached_urls(page)


def test_the_worker_never_sees_set_cookie_and_decides_on_cache_control(site, page, probes):
    controlled(page, site)
    (worker,) = page.context.service_workers
    seen = worker.evaluate(
        """async (urls) => {
            const seen = {};
            for (const url of urls) {
                const response = await fetch(url);
                seen[url] = {
                    setCookie: response.headers.get("Set-Cookie"),
                    cacheControl: response.headers.get("Cache-Control"),
                    mayCache: self.V10rPolicy.mayCache(response),
                };
            }
            return seen;
        }""",
        [WITH_COOKIE, WITHOUT_COOKIE],
    )
    # Set-Cookie is taken out of what fetch() hands a worker: a rule on it could never fire.
    assert seen[WITH_COOKIE]["setCookie"] is None
    assert {"private", "no-store"} <= {
        d.strip() for d in seen[WITH_COOKIE]["cacheControl"].split(",")
    }
    assert seen[WITH_COOKIE]["mayCache"] is False
    assert seen[WITHOUT_COOKIE] == {
        "setCookie": None,
        "cacheControl": "max-age=315360000, public, immutable",
        "mayCache": True,
    }


def test_the_install_keeps_only_what_the_policy_may_keep(site, page, probes, monkeypatch):
    real = precache.worker_config()
    listed = {**real, "precache": [*real["precache"], WITH_COOKIE, WITHOUT_COOKIE]}
    # Cached, as the real one is (fresh_worker clears it).
    monkeypatch.setattr(precache, "worker_config", functools.cache(lambda: listed))
    controlled(page, site)
    urls = cached_urls(page)
    assert WITHOUT_COOKIE in urls
    assert WITH_COOKIE not in urls
    assert set(urls) == set(real["precache"]) | set(real["offline"].values()) | {WITHOUT_COOKIE}


def test_logging_out_of_the_admin_flushes_the_caches(site, page, django_user_model):
    django_user_model.objects.create_superuser("staff", "staff@example.com", "pass-word-1")
    controlled(page, site)
    assert cache_names(page) != []
    log_in(page, site, username="staff", password="pass-word-1")
    page.click("#logout-form button[type=submit]")
    page.wait_for_selector("html[data-caches-flushed]")
    assert int(page.get_attribute("html", "data-caches-flushed")) >= 1
    assert cache_names(page) == []
    assert csp_violations(page) == []


def test_an_update_waits_until_the_visitor_reloads_into_it(site, page, monkeypatch):
    controlled(page, site)
    (old_cache,) = cache_names(page)
    old_version = old_cache.removeprefix("v10r-")
    original = views.worker_source(True)
    # A deploy: the worker's bytes (and its version) change.
    monkeypatch.setattr(
        views, "worker_source", lambda enabled: original.replace(old_version, "00000000000000a2")
    )
    assert page.is_hidden("[data-update-prompt]")
    page.evaluate("async () => (await navigator.serviceWorker.getRegistration()).update()")
    page.wait_for_selector("[data-update-prompt]:not([hidden])", timeout=30_000)
    # Installed and waiting: the page still runs the old version.
    assert page.evaluate("async () => !!(await navigator.serviceWorker.getRegistration()).waiting")
    with page.expect_navigation():
        page.click("[data-update-reload]")
    page.wait_for_function("() => navigator.serviceWorker.controller !== null")
    page.wait_for_function(
        "async () => (await caches.keys()).join() === 'v10r-00000000000000a2'", polling=200
    )
    assert (
        page.evaluate("async () => (await navigator.serviceWorker.getRegistration()).waiting")
        is None
    )
    assert page.is_hidden("[data-update-prompt]")
    assert csp_violations(page) == []


def test_the_kill_switch_unregisters_the_worker_and_empties_the_caches(site, page, settings):
    controlled(page, site)
    settings.SERVICE_WORKER_ENABLED = False
    page.evaluate("async () => (await navigator.serviceWorker.getRegistration()).update()")
    page.wait_for_function(
        "async () => (await navigator.serviceWorker.getRegistrations()).length === 0",
        polling=200,
        timeout=30_000,
    )
    page.wait_for_function("async () => (await caches.keys()).length === 0", polling=200)
    # Pages register nothing any more: the switch is also off in the HTML. (The navigation that
    # ends an unregistered worker's last client may still pass through it: the next does not.)
    for _ in range(3):
        page.reload()
        if page.evaluate("navigator.serviceWorker.controller === null"):
            break
    assert page.get_attribute("html", "data-service-worker") == ""
    assert page.evaluate("navigator.serviceWorker.controller === null")
    registrations = "async () => (await navigator.serviceWorker.getRegistrations()).length"
    assert page.evaluate(registrations) == 0


def test_chromium_finds_the_site_installable(site, chromium, tmp_path):
    # A profile of its own: Chromium never offers to install from an incognito context, which
    # is what every other test's context is.
    context = chromium.browser_type.launch_persistent_context(
        str(tmp_path / "profile"),
        executable_path=chromium_path(),
        args=CHROMIUM_ARGS,
    )
    try:
        page = context.pages[0] if context.pages else context.new_page()
        controlled(page, site)
        installable(page, site)
    finally:
        context.close()


def installable(page, site):
    session = page.context.new_cdp_session(page)
    errors = session.send("Page.getInstallabilityErrors")["installabilityErrors"]
    assert errors == []
    manifest = session.send("Page.getAppManifest")
    assert manifest["errors"] == []
    assert manifest["url"] == site.url + "/manifest.webmanifest"
