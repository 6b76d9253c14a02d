"""/service-worker.js, the manifest and the offline page, as the server sends them."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.staticfiles.storage import staticfiles_storage

from pwa import precache, views

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_worker():
    precache.worker_config.cache_clear()
    views.worker_source.cache_clear()
    yield
    precache.worker_config.cache_clear()
    views.worker_source.cache_clear()


def config_of(body: str) -> dict:
    return json.loads(re.match(r"const CONFIG = (\{.*?\n\});\n", body, re.S).group(1))


def test_the_worker_is_served_at_the_root_as_javascript_and_never_from_a_cache(client):
    response = client.get("/service-worker.js")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/javascript; charset=utf-8"
    assert response["Cache-Control"] == "no-cache"
    body = response.content.decode()
    assert "importScripts(CONFIG.policyUrl)" in body
    assert client.head("/service-worker.js").status_code == 200
    assert client.post("/service-worker.js").status_code == 405
    # No language prefix: its scope is the folder it is served from.
    assert client.get("/ru/service-worker.js").status_code == 404


def test_the_precache_is_the_hashed_files_the_pages_load_and_the_offline_pages(client):
    config = config_of(client.get("/service-worker.js").content.decode())
    precached = config["precache"]
    assert config["offline"] == {"en": "/offline/", "ru": "/ru/offline/", "de": "/de/offline/"}
    hashed = re.compile(r"^/static/.+\.[0-9a-f]{12}\.[a-z0-9]+$")
    assert all(hashed.match(url) for url in precached), precached
    names = {re.sub(r"\.[0-9a-f]{12}(\.[a-z0-9]+)$", r"\1", url) for url in precached}
    # The Web Worker module and what it imports, followed through the imports.
    for needed in (
        "/static/showcases/image-analysis.worker.js",
        "/static/showcases/image-analysis.js",
        "/static/showcases/palette.js",
        "/static/showcases/workers-page.js",
        "/static/showcases/frame-meter.js",
        "/static/showcases/worker-client.js",
        "/static/css/site.css",
        "/static/pwa/register.js",
    ):
        assert needed in names
    assert not any("/admin/" in url for url in precached), "the admin is never precached"
    assert len(precached) == len(set(precached))
    # Each URL is the one the storage gives, so it exists in the manifest.
    for url in precached:
        name = re.sub(r"\.[0-9a-f]{12}(\.[a-z0-9]+)$", r"\1", url).removeprefix("/static/")
        assert staticfiles_storage.url(name) == url
    assert config["policyUrl"] == staticfiles_storage.url("pwa/policy.js")


def test_a_change_to_the_list_makes_a_new_version(client, monkeypatch):
    first = config_of(client.get("/service-worker.js").content.decode())["version"]
    precache.worker_config.cache_clear()
    views.worker_source.cache_clear()
    monkeypatch.setattr(precache, "ENTRY_POINTS", precache.ENTRY_POINTS[:-1])
    second = config_of(client.get("/service-worker.js").content.decode())["version"]
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert first != second


def test_an_import_of_a_missing_file_is_named(monkeypatch, tmp_path, settings):
    (tmp_path / "broken.js").write_text('import { x } from "./gone.js";\n')
    settings.STATICFILES_DIRS = [*settings.STATICFILES_DIRS, str(tmp_path)]
    monkeypatch.setattr(precache, "ENTRY_POINTS", ("broken.js",))
    with pytest.raises(precache.MissingStaticFile, match="gone.js is not a static file"):
        precache.static_files()


def test_the_kill_switch_serves_a_worker_that_removes_itself(client, settings):
    settings.SERVICE_WORKER_ENABLED = False
    response = client.get("/service-worker.js")
    body = response.content.decode()
    assert response["Cache-Control"] == "no-cache"
    assert "registration.unregister()" in body
    assert "caches.delete" in body
    assert "CONFIG" not in body and "fetch" not in body.split("\n", 8)[-1]
    # And pages stop registering one.
    page = client.get("/").content.decode()
    assert 'data-service-worker=""' in page


def test_pages_register_the_worker_and_link_the_manifest(client):
    page = client.get("/ru/").content.decode()
    assert 'data-service-worker="/service-worker.js"' in page
    assert '<link rel="manifest" href="/ru/manifest.webmanifest">' in page
    assert re.search(r'<script type="module" src="/static/pwa/register\.[0-9a-f]{12}\.js"', page)
    assert page.count('name="theme-color"') == 2


@pytest.mark.parametrize(
    ("prefix", "language", "name"),
    [("", "en", "v10r: workers, made concrete"), ("/ru", "ru", "v10r: воркеры без абстракций")],
)
def test_the_manifest_says_what_an_installed_site_is(client, prefix, language, name):
    response = client.get(prefix + "/manifest.webmanifest")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/manifest+json"
    manifest = json.loads(response.content)
    assert manifest["name"] == name
    assert manifest["short_name"] == "v10r"
    assert manifest["lang"] == language
    assert manifest["start_url"] == prefix + "/"
    assert manifest["scope"] == "/"
    assert manifest["id"] == "/"
    assert manifest["display"] == "standalone"
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["theme_color"])
    icons = {(icon["sizes"], icon["purpose"]) for icon in manifest["icons"]}
    assert icons == {("192x192", "any"), ("512x512", "any"), ("512x512", "maskable")}
    for icon in manifest["icons"]:
        assert client.get(icon["src"]).status_code == 200


@pytest.mark.parametrize(
    ("prefix", "heading"),
    [("", "You are offline"), ("/ru", "Нет сети"), ("/de", "Sie sind offline")],
)
def test_the_offline_page_speaks_the_visitors_language_and_sets_no_cookie(client, prefix, heading):
    response = client.get(prefix + "/offline/")
    assert response.status_code == 200
    assert heading in response.content.decode()
    assert not response.cookies, "a precached page must not carry a cookie"
