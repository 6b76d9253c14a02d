"""The production static pipeline, proven in Chromium: DEBUG off, WhiteNoise, hashed modules."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.conf import settings
from PIL import Image

from tests.browser.conftest import csp_violations

pytestmark = pytest.mark.browser

HASHED = re.compile(r"\.[0-9a-f]{12}\.js$")


def manifest() -> dict[str, str]:
    return json.loads((settings.STATIC_ROOT / "staticfiles.json").read_text())["paths"]


def static_js_requests(tab) -> list[str]:
    """Collect the URL of every static .js file the tab or its workers fetch from now on."""
    seen: list[str] = []
    tab.context.on(
        "request",
        lambda r: seen.append(r.url) if "/static/" in r.url and r.url.endswith(".js") else None,
    )
    return seen


def test_imports_inside_collected_modules_are_rewritten_to_hashed_names():
    paths = manifest()
    worker = (settings.STATIC_ROOT / paths["showcases/image-analysis.worker.js"]).read_text()
    analysis = (settings.STATIC_ROOT / paths["showcases/image-analysis.js"]).read_text()
    hashed_analysis = paths["showcases/image-analysis.js"].rsplit("/", 1)[1]
    hashed_palette = paths["showcases/palette.js"].rsplit("/", 1)[1]
    assert f'from "./{hashed_analysis}"' in worker
    assert f'from "./{hashed_palette}"' in analysis


def test_a_module_importing_a_module_loads_the_hashed_twins(site, page):
    requests = static_js_requests(page)
    page.goto(site.url + "/")
    module_url = settings.STATIC_URL + manifest()["showcases/image-analysis.js"]
    exported = page.evaluate(
        """async (url) => {
            const module = await import(url);
            return [module.MAX_EDGE, typeof module.analyseImage];
        }""",
        module_url,
    )
    assert exported == [720, "function"]
    fetched = {url.rsplit("/", 1)[1] for url in requests}
    assert any(name.startswith("palette.") for name in fetched), fetched
    assert all(HASHED.search(name) for name in fetched), fetched
    assert csp_violations(page) == []


def test_a_module_worker_importing_modules_loads_the_hashed_twins_and_answers(site, page):
    requests = static_js_requests(page)
    page.goto(site.url + "/")
    worker_url = settings.STATIC_URL + manifest()["showcases/image-analysis.worker.js"]
    png = io.BytesIO()
    Image.new("RGBA", (4, 2), (200, 16, 40, 255)).save(png, format="PNG")
    reply = page.evaluate(
        """async ([url, bytes]) => {
            const worker = new Worker(url, { type: "module" });
            const buffer = new Uint8Array(bytes).buffer;
            const answer = new Promise((resolve, reject) => {
                worker.onmessage = (event) => resolve(event.data);
                worker.onerror = (event) => reject(new Error(event.message || "worker failed"));
                setTimeout(() => reject(new Error("worker timed out")), 10000);
            });
            worker.postMessage({ id: 1, bytes: buffer, type: "image/png", maxEdge: 720 }, [buffer]);
            const data = await answer;
            worker.terminate();
            return data;
        }""",
        [worker_url, list(png.getvalue())],
    )
    assert reply["ok"], reply
    assert [s["hex"] for s in reply["result"]["swatches"]] == ["#c81028"]
    fetched = {url.rsplit("/", 1)[1] for url in requests}
    assert {n.split(".")[0] for n in fetched} >= {"image-analysis", "palette"}, fetched
    assert all(HASHED.search(name) for name in fetched), fetched
    assert csp_violations(page) == []


def test_hashed_files_are_cached_forever_and_compressed(site_server, client):
    import urllib.request

    url = site_server.url + settings.STATIC_URL + manifest()["showcases/palette.js"]
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request) as response:
        cache_control = response.headers["Cache-Control"]
        encoding = response.headers.get("Content-Encoding")
    assert "immutable" in cache_control
    assert int(re.search(r"max-age=(\d+)", cache_control).group(1)) >= 365 * 24 * 3600
    assert encoding == "gzip"


# import … from "./x.js", import "./x.js", export … from "./x.js", import("./x.js")
RELATIVE_IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}/[^"']+)["']""")


def test_every_relative_import_in_every_collected_module_names_its_hashed_twin():
    paths = manifest()
    modules = [name for name in paths if name.startswith("showcases/") and name.endswith(".js")]
    # The page's modules, the old and the ones split out of workers-page.js.
    assert {
        "showcases/workers-page.js",
        "showcases/lanes.js",
        "showcases/verdict.js",
        "showcases/choosing.js",
        "showcases/errors.js",
        "showcases/sentences.js",
    } <= set(modules)
    checked = 0
    for name in modules:
        folder = name.rsplit("/", 1)[0]
        source = (settings.STATIC_ROOT / paths[name]).read_text()
        for target in RELATIVE_IMPORT.findall(source):
            assert HASHED.search(target), f"{paths[name]} imports {target}, unhashed"
            assert (settings.STATIC_ROOT / folder / target).is_file(), f"{name}: {target}"
            checked += 1
    assert checked >= 20, checked


def test_the_workers_page_loads_its_modules_hashed_and_becomes_ready(site, page):
    requests = static_js_requests(page)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    page.on("requestfailed", lambda r: failed.append(r.url))
    page.goto(site.url + "/showcases/workers/")
    page.wait_for_selector("#palette-demo[data-ready=true]")
    fetched = {url.rsplit("/", 1)[1] for url in requests}
    assert {name.split(".")[0] for name in fetched} >= {
        "workers-page",
        "lanes",
        "verdict",
        "choosing",
        "errors",
        "sentences",
        "numbers",
    }, fetched
    assert all(HASHED.search(name) for name in fetched), fetched
    assert failed == []
    assert csp_violations(page) == []
