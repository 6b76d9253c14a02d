"""/showcases/workers/ fits the window: at 390, 1280 and 1440 px, light and dark, English and
Russian, with a lane's results and a couple of queued tries on it, nothing runs past the right
edge (but inside something that scrolls or clips on purpose), the tile grids make even rows and
the tables need no sideways scrolling on a phone."""

from __future__ import annotations

import pytest

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser

PREFIX = {"en": "", "ru": "/ru"}
WIDTHS = [390, 1280, 1440]


# Every element whose right edge passes the window, unless an ancestor that ends inside the
# window holds it: one that clips (overflow-x hidden or clip: the palette bar, the visually
# hidden), or one that scrolls on purpose. Only the claim's SQL does: its lines must not wrap.
# A table that scrolls sideways on a phone is a failure, not an excuse.
SCROLLS_ON_PURPOSE = ".sql pre"
PAST_THE_EDGE = """(scrollsOnPurpose) => {
    const limit = window.innerWidth + 0.5;
    const describe = (el) => {
        const classes = [...el.classList].map((c) => "." + c).join("");
        const id = el.id ? "#" + el.id : "";
        const text = (el.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 40);
        const right = Math.round(el.getBoundingClientRect().right);
        return `${el.tagName.toLowerCase()}${id}${classes} (right ${right} px) "${text}"`;
    };
    const heldBack = (el) => {
        let up = el.parentElement;
        for (; up && up !== document.documentElement; up = up.parentElement) {
            const overflow = getComputedStyle(up).overflowX;
            if (overflow === "visible") continue;
            const clips = overflow === "hidden" || overflow === "clip";
            const inside = up.getBoundingClientRect().right <= limit;
            return (clips || up.matches(scrollsOnPurpose)) && inside;
        }
        return false;
    };
    const offenders = [];
    for (const el of document.body.querySelectorAll("*")) {
        const box = el.getBoundingClientRect();
        if (box.width === 0 && box.height === 0) continue;
        if (box.right > limit && !heldBack(el)) offenders.push(describe(el));
    }
    return {
        offenders,
        scrollWidth: document.scrollingElement.scrollWidth,
        innerWidth: window.innerWidth,
    };
}"""

# The tiles of a grid, grouped into rows by where they start.
ROWS = """(selector) => {
    const rows = new Map();
    for (const tile of document.querySelector(selector).children) {
        const top = Math.round(tile.getBoundingClientRect().top);
        rows.set(top, (rows.get(top) || 0) + 1);
    }
    return [...rows.values()];
}"""


def settle(page) -> None:
    """Wait two frames: the layout for the latest viewport size is done and painted."""
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")


def fill_the_page(page, site, language: str, photo: str) -> None:
    """The page as a visitor leaves it: both browser lanes run, two tries queued."""
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", photo)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, "main")
    run_lane(page, "worker")
    page.check("input[name=work-size][value='0']")  # shows the server lane's note
    for tries in (1, 2):
        page.click(".try-it button[type=submit]")
        page.wait_for_function(
            "(n) => document.querySelectorAll('#queue-live [data-feed-status]').length >= n",
            arg=tries,
        )


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("language", ["en", "ru"])
def test_nothing_runs_past_the_right_edge(site, page, small_png, tmp_path, language, scheme):
    page.emulate_media(color_scheme=scheme)
    fill_the_page(page, site, language, small_png)
    found = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        settle(page)
        page.screenshot(path=tmp_path / f"workers-{language}-{scheme}-{width}.png", full_page=True)
        measured = page.evaluate(PAST_THE_EDGE, SCROLLS_ON_PURPOSE)
        found[width] = measured
        assert measured["innerWidth"] == width
    assert {width: measured["offenders"] for width, measured in found.items()} == {
        width: [] for width in WIDTHS
    }
    assert [
        (width, m["scrollWidth"]) for width, m in found.items() if m["scrollWidth"] > width
    ] == []
    assert csp_violations(page) == []


@pytest.mark.parametrize(
    ("width", "policy", "depth"),
    [(390, [2, 2, 2], [2, 2, 2]), (1280, [3, 3], [6]), (1440, [3, 3], [6])],
)
@pytest.mark.parametrize("language", ["en", "ru"])
def test_six_tiles_make_even_rows(site, page, language, width, policy, depth):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(site.url + PREFIX[language] + PAGE)
    settle(page)
    assert page.evaluate(ROWS, ".policy") == policy
    assert page.evaluate(ROWS, "#queue-live .depth") == depth
    # No tile's words run out of it.
    overflowing = page.eval_on_selector_all(
        ".policy > div, .depth > div",
        "(tiles) => tiles.filter((t) => t.scrollWidth > t.clientWidth).map((t) => t.innerText)",
    )
    assert overflowing == []
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_at_390_px_the_tables_are_cards_that_need_no_sideways_scrolling(site, page, language):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(site.url + PREFIX[language] + PAGE)
    settle(page)
    tables = page.eval_on_selector_all(
        ".table-scroll",
        """(boxes) => {
          const labelOf = (td) => getComputedStyle(td, "::before").content;
          return boxes.map((box) => ({
            scrolls: box.scrollWidth > box.clientWidth,
            // The header row is there for screen readers only, as the cards label each cell.
            cutCells: [...box.querySelectorAll("tbody th, tbody td")]
                .filter((cell) => cell.scrollWidth > cell.clientWidth)
                .map((cell) => cell.textContent),
            unlabelled: [...box.querySelectorAll("td")]
                .filter((td) => labelOf(td) !== `"${td.dataset.label}"`)
                .map((td) => td.textContent),
          }));
        }""",
    )
    assert len(tables) == 2
    assert tables == [{"scrolls": False, "cutCells": [], "unlabelled": []}] * 2
    # Each cell is labelled with its column, in the page's language.
    first_label = page.eval_on_selector(
        "#meanings td", "(td) => getComputedStyle(td, '::before').content"
    )
    assert first_label == {"en": '"What it is"', "ru": '"Что это"'}[language]
    assert csp_violations(page) == []


# The text of each lane statistic's label and value, measured by the boxes of its glyphs (an
# element's box does not grow with text that overflows it): the pairs that touch, overlap or
# sit closer than min_gap px, by their text.
CRAMPED_STATS = """(minGap) => {
    const boxes = (el) => {
        const range = document.createRange();
        range.selectNodeContents(el);
        return [...range.getClientRects()].filter((r) => r.width > 0);
    };
    const apart = (a, b) => Math.max(
        b.left - a.right, a.left - b.right, b.top - a.bottom, a.top - b.bottom,
    );
    const cramped = [];
    for (const dt of document.querySelectorAll(".lane-stats dt")) {
        const dd = dt.nextElementSibling;
        const gaps = boxes(dt).flatMap((a) => boxes(dd).map((b) => apart(a, b)));
        const closest = Math.min(...gaps);
        if (!(closest >= minGap)) {
            cramped.push(`${dt.textContent} | ${dd.textContent} (${closest.toFixed(1)} px)`);
        }
    }
    return cramped;
}"""


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_a_lane_statistics_label_and_its_value_never_touch(site, page, language):
    open_demo(page, site, {"en": "", "ru": "/ru", "de": "/de"}[language] + PAGE)
    page.click("[data-sample]")
    page.wait_for_selector("[data-run=server]:not([disabled])", timeout=30_000)
    for lane in ("main", "worker", "server"):
        run_lane(page, lane)
    found = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        settle(page)
        found[width] = page.evaluate(CRAMPED_STATS, 4)
    assert page.eval_on_selector_all(".lane-stats dd", "(dds) => dds.length") == 17
    assert (
        page.eval_on_selector_all(
            ".lane-stats dd", "(dds) => dds.filter((dd) => dd.textContent === '—').length"
        )
        == 0
    )
    assert found == {width: [] for width in WIDTHS}
    assert csp_violations(page) == []
