"""The verdict under the lanes says what the two longest frames show, and nothing else.

A slow frame is forced where a test needs one: the main thread is kept busy for 150 ms inside
the lane's own measured work (in its decode call, or right after the page posts to the
worker), which is what a busy machine does to a frame.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo, run_lane, write_small_png

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def small_png(tmp_path_factory) -> str:
    return write_small_png(tmp_path_factory.mktemp("photos"))


PREFIX = {"en": "", "ru": "/ru"}
LIMIT = {"en": "32 ms", "ru": "32 мс"}
SLOW_FRAME_MS = 32

# Blocks the main thread for `ms` once decoding starts on it: only the main lane decodes on
# the page's thread (the page's own check of the file ran before this is installed).
STALL_MAIN_LANE = """(ms) => {
    const original = window.createImageBitmap;
    window.createImageBitmap = (...args) => {
        const answer = original(...args);
        const until = performance.now() + ms;
        while (performance.now() < until);
        return answer;
    };
}"""

# Blocks the main thread for `ms` right after the page hands the photo to the worker.
STALL_DURING_WORKER_LANE = """(ms) => {
    const original = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (...args) {
        original.apply(this, args);
        const until = performance.now() + ms;
        while (performance.now() < until);
    };
}"""

VERDICT = {
    "main": "verdictMainSlow",
    "both": "verdictBothSlow",
    "worker": "verdictWorkerSlow",
    "neither": "verdictNeither",
}


def messages(page) -> dict:
    return page.evaluate("JSON.parse(document.getElementById('palette-demo-messages').textContent)")


def expected_verdict(page, language: str, *, full_resolution: bool = False) -> tuple[str, str]:
    """Return the case the shown numbers fall in, and the sentence for it."""
    frames = {}
    shown = {}
    for lane in ("main", "worker"):
        dd = page.query_selector(f"[data-lane={lane}] [data-stat=frame]")
        frames[lane] = float(dd.get_attribute("data-value"))
        shown[lane] = dd.text_content()
    main_slow = frames["main"] > SLOW_FRAME_MS
    worker_slow = frames["worker"] > SLOW_FRAME_MS
    case = {
        (True, True): "both",
        (True, False): "main",
        (False, True): "worker",
        (False, False): "neither",
    }[main_slow, worker_slow]
    text = messages(page)
    sentence = (
        text[VERDICT[case]]
        .replace("{main}", shown["main"])
        .replace("{worker}", shown["worker"])
        .replace("{limit}", LIMIT[language])
    )
    if case == "neither" and not full_resolution:
        sentence += " " + text["tryFullResolution"]
    return case, spaced(sentence)


def spaced(text: str) -> str:
    """text with every run of white space as one space: Intl puts a no-break space between a
    number and its unit, and which one depends on the language and the ICU version."""
    return " ".join(text.split())


def shown_verdict(page) -> str:
    return spaced(page.text_content("[data-verdict]"))


def run_both(page, site, photo: str, language: str, *, stall: tuple[str, ...]) -> None:
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", photo)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    if "main" in stall:
        page.evaluate(STALL_MAIN_LANE, 150)
    if "worker" in stall:
        page.evaluate(STALL_DURING_WORKER_LANE, 150)
    run_lane(page, "main")
    run_lane(page, "worker")


@pytest.mark.parametrize("language", ["en", "ru"])
def test_when_both_lanes_stall_the_verdict_does_not_say_the_page_kept_moving(
    site, page, small_png, language
):
    run_both(page, site, small_png, language, stall=("main", "worker"))
    verdict = shown_verdict(page)
    assert "kept moving" not in verdict
    assert "не останавливалась" not in verdict
    case, sentence = expected_verdict(page, language)
    assert case == "both"
    assert verdict == sentence
    assert csp_violations(page) == []


def test_when_only_the_worker_lane_stalls_the_verdict_says_so(site, page, small_png):
    run_both(page, site, small_png, "en", stall=("worker",))
    case, sentence = expected_verdict(page, "en")
    # The main lane's own frame can be slow on a busy machine; whatever it was, the verdict
    # must match the numbers shown.
    assert case in {"worker", "both"}
    assert shown_verdict(page) == sentence
    assert "kept moving" not in sentence
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_when_only_the_main_thread_stalls_the_verdict_says_the_page_kept_moving(
    site, page, small_png, language
):
    run_both(page, site, small_png, language, stall=("main",))
    case, sentence = expected_verdict(page, language)
    assert case in {"main", "both"}
    assert shown_verdict(page) == sentence
    assert csp_violations(page) == []


def test_when_neither_stalls_the_verdict_says_neither_and_suggests_full_resolution(
    site, page, small_png
):
    run_both(page, site, small_png, "en", stall=())
    case, sentence = expected_verdict(page, "en")
    verdict = shown_verdict(page)
    assert verdict == sentence
    if case == "neither":
        assert verdict.endswith(
            "Choose full resolution to give the main thread enough work to freeze the page."
        )
    assert csp_violations(page) == []


def test_lanes_run_at_different_work_sizes_are_not_compared(site, page, small_png):
    open_demo(page, site)
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, "main")
    page.check("input[name=work-size][value='0']")
    run_lane(page, "worker")
    assert shown_verdict(page) == (
        "The two browser lanes ran at different work sizes; run both at the same size to "
        "compare them."
    )
    assert csp_violations(page) == []
