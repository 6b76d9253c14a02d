"""The verdict under the lanes compares the two longest frames, and says nothing else.

A slow frame is forced where a test needs one: the main thread is kept busy for a set time
inside the lane's own measured work (in its decode call, or right after the page posts to the
worker), which is what a busy machine does to a frame. A throttled CPU (Chromium's own
emulation) makes the whole page as slow as a busy machine's.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser


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
    "smoother": "verdictWorkerSmoother",
    "both": "verdictBothSlow",
    "both-main-longer": "verdictBothSlowMainLonger",
    "both-worker-longer": "verdictBothSlowWorkerLonger",
    "worker": "verdictWorkerSlow",
    "close": "verdictClose",
    "neither": "verdictNeither",
}


def plural_category(language: str, number: int) -> str:
    """CLDR's plural category of a whole number: "в 2 раза", "в 5 раз", "в 21 раз"."""
    if language != "ru":
        return "one" if number == 1 else "other"
    if number % 10 == 1 and number % 100 != 11:
        return "one"
    if number % 10 in (2, 3, 4) and number % 100 not in (12, 13, 14):
        return "few"
    return "many"


def far_longer(long: float, short: float) -> bool:
    return long >= 2 * short and long - short >= SLOW_FRAME_MS


def case_of(main: float, worker: float) -> str:
    main_slow, worker_slow = main > SLOW_FRAME_MS, worker > SLOW_FRAME_MS
    if not main_slow and not worker_slow:
        return "neither"
    if far_longer(main, worker):
        return "smoother" if worker_slow else "main"
    if far_longer(worker, main):
        return "worker"
    if not (main_slow and worker_slow):
        return "close"
    long, short = max(main, worker), min(main, worker)
    if long - short < SLOW_FRAME_MS or long <= 1.2 * short:
        return "both"
    return "both-main-longer" if main > worker else "both-worker-longer"


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
    case = case_of(frames["main"], frames["worker"])
    text = messages(page)
    template = text[VERDICT[case]]
    if case == "smoother":
        ratio = round(frames["main"] / frames["worker"])
        template = template[plural_category(language, ratio)].replace("{ratio}", str(ratio))
    sentence = (
        template.replace("{main}", shown["main"])
        .replace("{worker}", shown["worker"])
        .replace("{limit}", LIMIT[language])
    )
    if case in {"neither", "close"} and not full_resolution:
        sentence += " " + text["tryFullResolution"]
    return case, spaced(sentence)


def spaced(text: str) -> str:
    """text with every run of white space as one space: Intl puts a no-break space between a
    number and its unit, and which one depends on the language and the ICU version."""
    return " ".join(text.split())


def shown_verdict(page) -> str:
    return spaced(page.text_content("[data-verdict]"))


def run_both(
    page, site, photo: str, language: str, *, stall: tuple[str, ...], stall_ms=None
) -> None:
    """stall_ms: how long each stalled lane blocks the main thread, 150 ms unless told."""
    stall_ms = {"main": 150, "worker": 150, **(stall_ms or {})}
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", photo)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    if "main" in stall:
        page.evaluate(STALL_MAIN_LANE, stall_ms["main"])
    if "worker" in stall:
        page.evaluate(STALL_DURING_WORKER_LANE, stall_ms["worker"])
    run_lane(page, "main")
    run_lane(page, "worker")


def throttle_cpu(page, rate: int) -> None:
    """Make Chromium run the page's threads `rate` times slower, as on a busy machine."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})


@pytest.mark.parametrize("language", ["en", "ru"])
def test_when_both_lanes_stall_alike_the_verdict_says_they_were_alike_on_a_busy_machine(
    site, page, small_png, language
):
    run_both(page, site, small_png, language, stall=("main", "worker"))
    verdict = shown_verdict(page)
    assert "kept moving" not in verdict
    assert "не останавливалась" not in verdict
    case, sentence = expected_verdict(page, language)
    assert case == "both"
    assert verdict == sentence
    assert {"en": "The machine was busy", "ru": "Компьютер был занят"}[language] in verdict
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_on_a_busy_machine_a_far_longer_main_thread_stall_is_called_far_smoother_with_the_ratio(
    site, page, small_png, language
):
    throttle_cpu(page, 6)
    # Both lanes over the stutter line; the main thread's freeze several times the worker's.
    run_both(
        page,
        site,
        small_png,
        language,
        stall=("main", "worker"),
        stall_ms={"main": 600, "worker": 60},
    )
    case, sentence = expected_verdict(page, language)
    assert case == "smoother", sentence
    verdict = shown_verdict(page)
    assert verdict == sentence
    main = spaced(page.text_content("[data-lane=main] [data-stat=frame]"))
    worker = spaced(page.text_content("[data-lane=worker] [data-stat=frame]"))
    assert main in verdict and worker in verdict
    said = {"en": r"was \d+ times as long", "ru": r"в \d+ раза? длиннее"}[language]
    assert re.search(said, verdict), verdict
    assert csp_violations(page) == []


def test_when_only_the_worker_lane_stalls_the_verdict_says_so(site, page, small_png):
    run_both(page, site, small_png, "en", stall=("worker",))
    case, sentence = expected_verdict(page, "en")
    # The main lane's own frame can be slow on a busy machine; whatever it was, the verdict
    # must match the numbers shown.
    assert case in {"worker", "both", "both-worker-longer", "both-main-longer"}
    assert shown_verdict(page) == sentence
    assert "kept moving" not in sentence
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_when_only_the_main_thread_stalls_the_verdict_says_the_page_kept_moving(
    site, page, small_png, language
):
    run_both(page, site, small_png, language, stall=("main",))
    case, sentence = expected_verdict(page, language)
    # On a busy machine the worker lane stutters too; the verdict then compares the two.
    assert case in {"main", "smoother", "both", "both-main-longer", "both-worker-longer"}
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
