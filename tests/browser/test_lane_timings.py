"""The browser lanes' split timings: decode, read-back and palette, each a User Timing measure
on the thread that ran it (bench/browser_lanes.py reads them there)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

PAGE = "/showcases/workers/"

READ_MEASURES = """async (url) => {
  const { MEASURES } = await import(url);
  return Object.fromEntries(
    Object.entries(MEASURES).map(([phase, name]) => [
      phase,
      performance.getEntriesByName(name, "measure").map((entry) => entry.duration),
    ]),
  );
}"""


def run_lane(page, lane: str) -> dict[str, float]:
    page.click(f"[data-run={lane}]")
    page.wait_for_selector(f"[data-lane={lane}][data-done=true]", timeout=60_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-run]')].every((b) => !b.disabled)"
    )
    return {
        stat: float(page.text_content(f"[data-lane={lane}] [data-stat={stat}]").split()[0])
        for stat in ("decode", "analysis")
    }


def test_each_browser_lane_measures_its_phases_on_its_own_thread(site, page):
    page.goto(site.url + PAGE)
    page.wait_for_selector("#palette-demo[data-ready=true]")
    url = page.get_attribute("#palette-demo", "data-analysis-url")
    page.click("[data-sample]")
    page.wait_for_selector("[data-run=main]:not([disabled])")

    shown = run_lane(page, "main")
    main = page.evaluate(READ_MEASURES, url)
    assert {phase: len(durations) for phase, durations in main.items()} == {
        "decode": 1,
        "readBack": 1,
        "palette": 1,
    }
    # The page's "Decode" is bytes to pixels (decode + read-back), its "Analysis" the palette;
    # both are shown to the nearest millisecond.
    assert shown["decode"] == pytest.approx(main["decode"][0] + main["readBack"][0], abs=0.51)
    assert shown["analysis"] == pytest.approx(main["palette"][0], abs=0.51)

    shown = run_lane(page, "worker")
    # The worker's run lands on the worker's timeline, not the page's.
    assert page.evaluate(READ_MEASURES, url) == main
    [worker] = page.workers
    measured = worker.evaluate(READ_MEASURES, url)
    assert {phase: len(durations) for phase, durations in measured.items()} == {
        "decode": 1,
        "readBack": 1,
        "palette": 1,
    }
    assert all(durations[0] > 0 for durations in measured.values()), measured
    assert shown["decode"] == pytest.approx(
        measured["decode"][0] + measured["readBack"][0], abs=0.51
    )
    assert shown["analysis"] == pytest.approx(measured["palette"][0], abs=0.51)


READ_WORK = """() => Object.fromEntries(
  [...document.querySelectorAll("[data-lane]")].map((lane) => {
    const analysis = lane.querySelector("[data-stat=analysis]");
    return [lane.dataset.lane, {
      label: analysis.previousElementSibling.textContent,
      passes: analysis.dataset.passes,
      pixels: lane.querySelector("[data-stat=size]").textContent,
    }];
  }),
)"""


def test_the_three_lanes_analysis_times_the_same_work_on_the_same_pixels(site, page):
    page.goto(site.url + PAGE)
    page.wait_for_selector("#palette-demo[data-ready=true]")
    page.click("[data-sample]")
    page.wait_for_selector("[data-run=main]:not([disabled])")
    for lane in ("main", "worker", "server"):
        run_lane(page, lane)

    work = page.evaluate(READ_WORK)
    # One word for the three figures, so one piece of work: the same number of palette passes
    # (the one the page's note names) over the same pixels, at the 720 px work size.
    assert {lane: figure["label"].split(",")[0] for lane, figure in work.items()} == {
        "main": "Analysis",
        "worker": "Analysis",
        "server": "Analysis",
    }
    assert {figure["passes"] for figure in work.values()} == {"1"}, work
    assert len({figure["pixels"] for figure in work.values()}) == 1, work
    note = page.text_content("[data-analysis-note]")
    assert "one palette pass" in note
