"""The server lane says what it measured: its own work apart from the round trip, the 720 px
copy it analyses whatever the work size, and when a call was its process's first."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from PIL import Image

from showcases import analysis
from tests.browser.conftest import csp_violations, photo
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser

PREFIX = {"en": "", "ru": "/ru"}
FULL_RESOLUTION_NOTE = {
    "en": (
        "Full resolution is for the browser lanes: the server always analyses a copy of at most "
        "720 px on the longest edge, which bounds the memory one upload can take."
    ),
    "ru": (
        "Полное разрешение — только для браузерных дорожек: сервер всегда анализирует копию не "
        "больше 720 пкс по длинной стороне, и так память на одну загрузку остаётся ограниченной."
    ),
}


@photo("wide.png")
def wide_png() -> Image.Image:
    """1200 × 900 px in a few kilobytes: over 720 px, yet quick to decode and to send."""
    image = np.zeros((900, 1200, 3), dtype=np.uint8)
    image[:, :600] = (30, 140, 200)
    image[:, 600:] = (220, 180, 40)
    return Image.fromarray(image)


def stat(page, lane: str, name: str) -> str:
    return page.text_content(f"[data-lane={lane}] [data-stat={name}]")


def visible_text(page, selector: str) -> str:
    return " ".join(page.inner_text(selector).split())


@pytest.mark.parametrize("language", ["en", "ru"])
def test_at_full_resolution_the_server_lane_says_it_still_works_at_720_px(
    site, page, wide_png, language
):
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", wide_png)
    page.wait_for_selector("[data-run=server]:not([disabled])")
    note = "[data-lane=server] [data-full-resolution-note]"
    assert page.is_hidden(note)
    page.check("input[name=work-size][value='0']")
    assert visible_text(page, note) == FULL_RESOLUTION_NOTE[language]
    run_lane(page, "main")
    run_lane(page, "server")
    # What each lane really analysed, side by side.
    unit = {"en": "px", "ru": "пкс"}[language]
    assert stat(page, "main", "size") == f"1200 × 900 {unit}"
    assert stat(page, "server", "size") == f"720 × 540 {unit}"
    page.check("input[name=work-size][value='720']")
    assert page.is_hidden(note)
    assert csp_violations(page) == []


# Notes, for each call, when the page sent the request and when it had read the answer.
TIME_FETCH = """() => {
    window.__fetches = [];
    const original = window.fetch;
    window.fetch = async (...args) => {
        const started = performance.now();
        const response = await original(...args);
        const json = response.json.bind(response);
        response.json = async () => {
            const data = await json();
            window.__fetches.push({ ms: performance.now() - started, data });
            return data;
        };
        return response;
    };
}"""


def test_the_round_trip_is_the_request_alone_and_the_server_work_is_the_servers(
    site, page, wide_png
):
    open_demo(page, site)
    page.set_input_files("#demo-file", wide_png)
    page.wait_for_selector("[data-run=server]:not([disabled])")
    page.evaluate(TIME_FETCH)
    run_lane(page, "server")
    [fetched] = page.evaluate("window.__fetches")
    shown = page.eval_on_selector_all(
        "[data-lane=server] [data-stat]",
        "(dds) => Object.fromEntries(dds.map((dd) => [dd.dataset.stat, dd.dataset.value]))",
    )
    # The round trip is the request itself, not the frames the lane waits for around it
    # (which made a first call look up to three frames slower than it was).
    assert float(shown["roundtrip"]) == pytest.approx(fetched["ms"], abs=1.0)
    # Decode, analysis and their sum are the server's own clock.
    assert float(shown["decode"]) == pytest.approx(fetched["data"]["decodeMs"])
    assert float(shown["analysis"]) == pytest.approx(fetched["data"]["analysisMs"])
    assert float(shown["work"]) == pytest.approx(
        fetched["data"]["decodeMs"] + fetched["data"]["analysisMs"]
    )
    labels = page.eval_on_selector_all(
        "[data-lane=server] .lane-stats dt", "(dts) => dts.map((dt) => dt.textContent)"
    )
    assert labels[:4] == [
        "Decode, on the server",
        "Analysis, on the server",
        "Server work time",
        "Round trip, from this page",
    ]
    assert "The server times its own decode and analysis." in page.inner_text("[data-lane=server]")
    assert csp_violations(page) == []


@pytest.mark.parametrize(
    ("language", "says"),
    [
        ("en", "This was the first analysis in this server process"),
        ("ru", "Это был первый анализ в этом серверном процессе"),
    ],
)
def test_a_server_processs_first_analysis_is_labelled_as_such(
    site, page, wide_png, monkeypatch, language, says
):
    # The server thread shares this process: as if it had just started.
    monkeypatch.setattr(analysis, "_analyses", itertools.count())
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", wide_png)
    page.wait_for_selector("[data-run=server]:not([disabled])")
    note = "[data-lane=server] [data-first-call-note]"
    run_lane(page, "server")
    assert page.is_visible(note)
    assert says in page.inner_text(note)
    run_lane(page, "server")
    assert page.is_hidden(note)
    assert csp_violations(page) == []
