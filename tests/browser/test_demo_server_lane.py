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


# Every reading of the page's clock, in order, and among them where the request to the server
# lane was sent ("fetch"), where its answer had been read ("read"), and each animation frame.
RECORD_CLOCK = """() => {
    window.__clock = [];
    const now = performance.now.bind(performance);
    performance.now = () => {
        const reading = now();
        window.__clock.push(reading);
        return reading;
    };
    const serverUrl = document.querySelector("[data-server-url]").dataset.serverUrl;
    const original = window.fetch;
    window.fetch = async (...args) => {
        if (String(args[0]) !== serverUrl) return original(...args);
        window.__clock.push("fetch");
        const response = await original(...args);
        const json = response.json.bind(response);
        response.json = async () => {
            const data = await json();
            window.__clock.push("read");
            window.__answer = data;
            return data;
        };
        return response;
    };
    const frame = () => {
        window.__clock.push("frame");
        requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
}"""


def round_trip_readings(clock: list, shown: float) -> tuple[float, float] | None:
    """The two readings of the clock whose difference the page showed as its round trip, if
    the first is the one just before the request was sent and the second comes after its
    answer was read, with no animation frame before it."""
    assert clock.count("fetch") == clock.count("read") == 1, clock
    sent, read = clock.index("fetch"), clock.index("read")
    started = clock[sent - 1] if sent else "nothing"
    if isinstance(started, str):
        return None  # a frame came between the page's last reading and the request
    for reading in clock[read + 1 :]:
        if reading == "frame":
            return None
        if reading - started == shown:
            return started, reading
    return None


def test_the_round_trip_is_the_request_alone_and_the_server_work_is_the_servers(
    site, page, wide_png
):
    open_demo(page, site)
    page.set_input_files("#demo-file", wide_png)
    page.wait_for_selector("[data-run=server]:not([disabled])")
    page.evaluate(RECORD_CLOCK)
    run_lane(page, "server")
    clock, answer = page.evaluate("[window.__clock, window.__answer]")
    shown = page.eval_on_selector_all(
        "[data-lane=server] [data-stat]",
        "(dds) => Object.fromEntries(dds.map((dd) => [dd.dataset.stat, dd.dataset.value]))",
    )
    # The round trip is the request itself, not the frames the lane waits for around it
    # (which made a first call look up to three frames slower than it was): the very two
    # readings the page took, compared with where the request began and ended among them,
    # not with a second clock (a busy machine may pause the page between any two readings).
    sent, read = clock.index("fetch"), clock.index("read")
    around = (clock[max(sent - 3, 0) : sent + 1], clock[read : read + 6])
    assert round_trip_readings(clock, float(shown["roundtrip"])), (shown["roundtrip"], around)
    # Decode, analysis and their sum are the server's own clock.
    assert float(shown["decode"]) == pytest.approx(answer["decodeMs"])
    assert float(shown["analysis"]) == pytest.approx(answer["analysisMs"])
    assert float(shown["work"]) == pytest.approx(answer["decodeMs"] + answer["analysisMs"])
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
