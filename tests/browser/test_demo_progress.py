"""While a lane runs, it says so: its old numbers are gone, it is aria-busy, and a status line
is on screen — painted before the main lane's work can freeze the thread that paints."""

from __future__ import annotations

import pytest

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser


PREFIX = {"en": "", "ru": "/ru"}
STATUS = {
    "main": {
        "en": "Working… the page freezes until the main thread is done.",
        "ru": "Идёт работа… страница замрёт, пока основной поток не закончит.",
    },
    "worker": {
        "en": "Working in the worker… the main thread stays free.",
        "ru": "Идёт работа в воркере… основной поток остаётся свободным.",
    },
    "server": {
        "en": "Sending the photo and waiting for the server…",
        "ru": "Фото отправлено, ждём ответа сервера…",
    },
}

# Counts animation frames, and notes the count when the lane's status line gets its text, so
# a snapshot can tell how many frames (and so paints) came between the two.
COUNT_FRAMES = """(lane) => {
    window.__frames = 0;
    const tick = () => { window.__frames += 1; requestAnimationFrame(tick); };
    requestAnimationFrame(tick);
    const status = document.querySelector(`[data-lane="${lane}"] [data-status]`);
    new MutationObserver(() => {
        if (status.textContent) window.__framesAtStatus = window.__frames;
    }).observe(status, { childList: true, characterData: true, subtree: true });
}"""

# What the lane looks like at the moment its work starts: `where` is the call that starts it
# (the main lane's decode, the post to the worker, the server's fetch). The main lane's call
# then holds the thread for 300 ms, like a large photo.
SNAPSHOT_AT = """([lane, where]) => {
    const snapshot = () => {
        const root = document.querySelector(`[data-lane="${lane}"]`);
        const status = root.querySelector("[data-status]");
        const box = status.getBoundingClientRect();
        window.__snapshot = {
            status: status.textContent,
            statusShown: box.height > 0 && getComputedStyle(status).visibility === "visible",
            busy: root.getAttribute("aria-busy"),
            stats: [...root.querySelectorAll("[data-stat]")].map((dd) => dd.textContent),
            swatches: root.querySelectorAll(".swatch").length,
            legend: root.querySelectorAll("[data-legend] li").length,
            framesSinceStatus: window.__frames - window.__framesAtStatus,
        };
    };
    if (where === "decode") {
        const original = window.createImageBitmap;
        window.createImageBitmap = (...args) => {
            snapshot();
            const answer = original(...args);
            const until = performance.now() + 300;
            while (performance.now() < until);
            return answer;
        };
    } else if (where === "post") {
        const original = Worker.prototype.postMessage;
        Worker.prototype.postMessage = function (...args) {
            snapshot();
            return original.apply(this, args);
        };
    } else {
        // Only the lane's own post: the live queue below polls with fetch too.
        const url = document.getElementById("palette-demo").dataset.serverUrl;
        const original = window.fetch;
        window.fetch = (...args) => {
            if (String(args[0]) === url) snapshot();
            return original(...args);
        };
    }
}"""

WHERE = {"main": "decode", "worker": "post", "server": "fetch"}


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize("lane", ["main", "worker", "server"])
def test_a_running_lane_shows_it_is_working_and_not_its_old_numbers(
    site, page, small_png, lane, language
):
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, lane)  # numbers from a first run, to be cleared by the second
    assert "—" not in page.text_content(f"[data-lane={lane}] [data-stat=work]")
    page.evaluate(COUNT_FRAMES, lane)
    page.evaluate(SNAPSHOT_AT, [lane, WHERE[lane]])
    run_lane(page, lane)
    snapshot = page.evaluate("window.__snapshot")
    stats = snapshot.pop("stats")
    frames = snapshot.pop("framesSinceStatus")
    assert snapshot == {
        "status": STATUS[lane][language],
        "statusShown": True,
        "busy": "true",
        "swatches": 0,
        "legend": 0,
    }
    assert set(stats) == {"—"}
    # Two frames: the second one's callback runs after the first one's paint.
    assert frames >= 2
    # Done: the status is gone, the numbers are back.
    assert page.text_content(f"[data-lane={lane}] [data-status]") == ""
    assert page.get_attribute(f"[data-lane={lane}]", "aria-busy") is None
    assert "—" not in page.text_content(f"[data-lane={lane}] [data-stat=work]")
    assert csp_violations(page) == []
