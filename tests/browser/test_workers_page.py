"""/showcases/workers/ in Chromium, on the production static pipeline with the CSP enforced."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from notifications import worker
from tests.browser.conftest import csp_violations

pytestmark = pytest.mark.browser

PAGE = "/showcases/workers/"


@pytest.fixture(scope="session")
def big_photo(tmp_path_factory) -> str:
    """A 12-megapixel JPEG (4000 × 3000) with smooth colour and grain, like a phone photo."""
    rng = np.random.default_rng(12)
    y, x = np.mgrid[0:3000, 0:4000].astype(np.float32)
    image = np.stack(
        [120 + 100 * np.sin(x / 700), 110 + 90 * np.cos(y / 500), 90 + 60 * np.sin((x + y) / 900)],
        axis=-1,
    )
    image += rng.normal(0, 12, size=image.shape)
    path = tmp_path_factory.mktemp("photos") / "twelve-megapixels.jpg"
    Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(path, quality=90)
    return str(path)


def open_demo(page, site, path: str = PAGE):
    page.goto(site.url + path)
    page.wait_for_selector("#palette-demo[data-ready=true]")


def run_lane(page, lane: str) -> dict:
    page.click(f"[data-run={lane}]")
    page.wait_for_selector(f"[data-lane={lane}][data-done=true]", timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-run]')].every((b) => !b.disabled)"
    )
    return page.evaluate(
        """(lane) => {
            const root = document.querySelector(`[data-lane="${lane}"]`);
            const stat = (name) => root.querySelector(`[data-stat="${name}"]`)?.textContent;
            return {
                hexes: [...root.querySelectorAll('.swatch')].map((s) => s.dataset.hex),
                widths: [...root.querySelectorAll('.swatch')].map((s) => s.style.width),
                frame: Number(root.querySelector('[data-stat="frame"]').dataset.value),
                transfer: stat('transfer'),
            };
        }""",
        lane,
    )


def test_both_browser_lanes_give_the_same_palette_for_the_sample_photo(site, page):
    open_demo(page, site)
    page.click("[data-sample]")
    page.wait_for_selector("[data-run=main]:not([disabled])")
    main = run_lane(page, "main")
    worker = run_lane(page, "worker")
    assert len(main["hexes"]) == 6
    assert main["hexes"] == worker["hexes"]
    assert main["widths"] == worker["widths"]
    assert page.text_content("[data-verdict]").strip()
    assert csp_violations(page) == []


def test_at_full_resolution_the_main_thread_freezes_and_the_worker_does_not(site, page, big_photo):
    open_demo(page, site)
    page.set_input_files("#demo-file", big_photo)
    page.check("input[name=work-size][value='0']")
    page.wait_for_selector("[data-run=main]:not([disabled])")
    # The worker first: the main lane's 48 MB of pixels, once garbage, could be collected on
    # the main thread during the worker's run and stall it.
    worker = run_lane(page, "worker")
    main = run_lane(page, "main")
    assert main["frame"] > 100, main
    # Not a fixed bound: on a busy machine the worker lane's frames stutter too (the verdict
    # says so), but not as long as the main thread freezes.
    assert worker["frame"] < main["frame"] / 2, (main, worker)
    assert main["hexes"] == worker["hexes"]
    # The transfer moved the bytes: the sender's copy is empty.
    assert page.get_attribute("#palette-demo", "data-transferred-bytes") == "0"
    assert worker["transfer"].endswith("→ 0 bytes")
    assert csp_violations(page) == []


def test_a_worker_that_fails_to_load_reports_an_error_and_gives_the_buttons_back(
    site, page, small_png
):
    open_demo(page, site)
    page.evaluate(
        "document.getElementById('palette-demo').dataset.workerUrl = '/static/no-such-worker.js'"
    )
    page.set_input_files("#demo-file", small_png)
    page.click("[data-run=worker]")
    error = page.wait_for_selector("[data-error]:not([hidden])", timeout=15_000)
    assert "worker" in error.text_content().lower()
    page.wait_for_selector("[data-run=worker]:not([disabled])")
    # The main thread still works afterwards.
    assert run_lane(page, "main")["hexes"]


def test_the_server_lane_agrees_with_the_browser_on_a_lossless_png(site, page, small_png):
    open_demo(page, site)
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    browser = run_lane(page, "main")
    server = run_lane(page, "server")
    assert server["hexes"] == browser["hexes"]
    assert server["widths"] == browser["widths"]
    assert csp_violations(page) == []


def test_a_file_that_is_not_an_image_gets_an_inline_error(site, page, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not an image")
    open_demo(page, site)
    page.set_input_files("#demo-file", str(text))
    error = page.wait_for_selector("[data-error]:not([hidden])")
    assert "not an image" in error.text_content()
    assert page.is_disabled("[data-run=main]")


def _bomb(path):
    # 8000 × 8000 pixels in a few kilobytes of PNG.
    Image.new("1", (8000, 8000)).save(path, format="PNG")


def _oversized(path):
    # A JPEG the browser decodes (it stops at the end-of-image marker), 21 MB with its padding.
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (1, 2, 3)).save(buffer, format="JPEG")
    path.write_bytes(buffer.getvalue() + bytes(21 * 1024 * 1024))


@pytest.mark.parametrize(
    ("make", "name", "message"),
    [
        (_bomb, "bomb.png", "has 64 million pixels; the server lane takes at most 50 million"),
        (_oversized, "huge.jpg", "the server lane takes files up to 20 MB"),
    ],
    ids=["bomb", "oversized"],
)
def test_a_photo_the_server_would_refuse_turns_its_lane_off_before_uploading(
    site, page, tmp_path, make, name, message
):
    # The server's own refusals of these are tested on the view (tests/showcases/test_page.py).
    path = tmp_path / name
    make(path)
    open_demo(page, site)
    page.set_input_files("#demo-file", str(path))
    page.wait_for_selector("[data-run=main]:not([disabled])", timeout=30_000)
    assert page.is_disabled("[data-run=server]")
    assert message in page.text_content("[data-server-refusal]")


def test_try_it_shows_the_notification_move_through_the_queue(site, page):
    open_demo(page, site)
    before = int(page.text_content("[data-depth=pending]"))
    page.click(".try-it button[type=submit]")
    page.wait_for_selector("[data-feed-status=pending]")
    assert int(page.text_content("[data-depth=pending]")) == before + 1
    worker.drain_once()  # the drain loop's turn: the same claim, fence and writes
    page.wait_for_selector("[data-feed-status=sent]", timeout=10_000)
    assert int(page.text_content("[data-depth=sent]")) >= 1
    assert csp_violations(page) == []


def test_a_refused_try_it_says_why_beside_the_button(site, page, monkeypatch):
    from showcases import queue_demo

    monkeypatch.setattr(queue_demo, "PENDING_LIMIT", 1)  # the server thread shares the module
    open_demo(page, site)
    page.click(".try-it button[type=submit]")
    page.wait_for_selector("[data-feed-status=pending]")
    page.click(".try-it button[type=submit]")
    alert = page.wait_for_selector("#try-error:not([hidden])", timeout=10_000)
    assert alert.text_content() == "The demo queue is full; try again in a minute."
    assert page.locator("[data-feed-status]").count() == 1
    assert csp_violations(page) == []


def test_the_russian_page_is_in_russian(site, page):
    open_demo(page, site, "/ru" + PAGE)
    assert page.get_attribute("html", "lang") == "ru"
    assert page.text_content("h1") == "Воркеры"
    assert page.is_visible("text=Запустить в воркере")
    assert csp_violations(page) == []


def test_a_worker_that_does_not_answer_in_time_is_replaced_and_reported(site, page, big_photo):
    open_demo(page, site)
    page.evaluate("document.getElementById('palette-demo').dataset.workerTimeoutMs = '5'")
    page.set_input_files("#demo-file", big_photo)
    page.check("input[name=work-size][value='0']")
    page.click("[data-run=worker]")
    error = page.wait_for_selector("[data-error]:not([hidden])", timeout=15_000)
    assert "did not answer within 0.005 s" in error.text_content()
    page.wait_for_selector("[data-run=worker]:not([disabled])")
    # A fresh worker takes over once there is time enough.
    page.evaluate("document.getElementById('palette-demo').dataset.workerTimeoutMs = '60000'")
    page.check("input[name=work-size][value='720']")
    assert run_lane(page, "worker")["hexes"]


def test_with_reduced_motion_the_dot_stays_still_and_the_frame_counter_runs(site, chromium):
    context = chromium.new_context(reduced_motion="reduce")
    tab = context.new_page()
    try:
        tab.goto(site.url + PAGE)
        tab.wait_for_selector("#palette-demo[data-ready=true]")
        first = int(tab.get_attribute("[data-frames]", "data-count"))
        tab.wait_for_function(
            "(n) => Number(document.querySelector('[data-frames]').dataset.count) > n",
            arg=first + 5,
        )
        assert tab.eval_on_selector("[data-pulse]", "el => el.style.transform") == ""
    finally:
        context.close()
