"""Under each palette bar, a legend in words: every swatch's colour code and share, and what the
grey left over is — readable on a 390 px phone, not hidden in tooltips."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from tests.browser.conftest import csp_violations, write_small_png
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser


PREFIX = {"en": "", "ru": "/ru"}
OTHER = {
    "en": re.compile(r"^Grey, (?P<percent>[\d.]+)%: pixels near none of these six colours$"),
    "ru": re.compile(
        r"^Серое, (?P<percent>[\d,]+) %: пиксели, не близкие ни к одному из этих шести цветов$"
    ),
}
SWATCH = {
    "en": re.compile(r"^(?P<hex>#[0-9a-f]{6}) (?P<percent>[\d.]+)%$"),
    "ru": re.compile(r"^(?P<hex>#[0-9a-f]{6}) (?P<percent>[\d,]+) %$"),
}

READ_LEGEND = """(lane) => {
    const root = document.querySelector(`[data-lane="${lane}"]`);
    const items = [...root.querySelectorAll("[data-legend] li")];
    return {
        segments: [...root.querySelectorAll(".swatch")].map((s) => ({
            hex: s.dataset.hex,
            share: parseFloat(s.style.width) / 100,
        })),
        items: items.map((li) => {
            const box = li.getBoundingClientRect();
            return {
                text: li.innerText.replace(/\\s+/g, " ").trim(),
                other: li.hasAttribute("data-other"),
                chip: getComputedStyle(li.querySelector(".chip")).backgroundColor,
                left: box.left,
                right: box.right,
                height: box.height,
                fontSize: parseFloat(getComputedStyle(li).fontSize),
            };
        }),
        bar: getComputedStyle(root.querySelector("[data-palette]")).backgroundColor,
        innerWidth: window.innerWidth,
    };
}"""


def rgb(hex_code: str) -> str:
    r, g, b = (int(hex_code[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def number(text: str) -> float:
    return float(text.replace(",", "."))


@pytest.mark.parametrize("language", ["en", "ru"])
def test_the_legend_names_each_swatch_and_the_grey_remainder_at_390_px(
    site, page, small_png, language
):
    page.set_viewport_size({"width": 390, "height": 844})
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, "main")
    legend = page.evaluate(READ_LEGEND, "main")
    segments, items = legend["segments"], legend["items"]
    assert len(segments) == 6
    *swatch_items, other = items
    assert [item["other"] for item in items] == [False] * 6 + [True]

    for segment, item in zip(segments, swatch_items, strict=True):
        match = SWATCH[language].match(item["text"])
        assert match, item["text"]
        assert match["hex"] == segment["hex"]
        assert number(match["percent"]) == pytest.approx(segment["share"] * 100, abs=0.05)
        assert item["chip"] == rgb(segment["hex"])

    match = OTHER[language].match(other["text"])
    assert match, other["text"]
    rest = 1 - sum(segment["share"] for segment in segments)
    assert number(match["percent"]) == pytest.approx(rest * 100, abs=0.06)
    # The remainder's chip is the very grey that shows through the bar.
    assert other["chip"] == legend["bar"]

    # On screen, whole, and at a size one can read.
    for item in items:
        assert item["left"] >= 0 and item["right"] <= legend["innerWidth"], item
        assert item["height"] > 0 and item["fontSize"] >= 12, item
    assert csp_violations(page) == []


def test_a_photo_of_six_colours_or_fewer_has_no_grey_remainder(site, page, tmp_path):
    from PIL import Image

    path = tmp_path / "two-colours.png"
    image = Image.new("RGB", (40, 20), (200, 40, 60))
    image.paste((20, 120, 220), (0, 0, 10, 20))
    image.save(path)
    open_demo(page, site)
    page.set_input_files("#demo-file", str(path))
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, "main")
    texts = page.eval_on_selector_all(
        "[data-lane=main] [data-legend] li", "(lis) => lis.map((li) => li.innerText)"
    )
    assert [" ".join(text.split()) for text in texts] == ["#c8283c 75.0%", "#1478dc 25.0%"]
    assert csp_violations(page) == []


TRANSPARENT = {
    "en": (
        "50.0% of the pixels are transparent, or nearly, and are not counted: the shares above "
        "are of the other pixels."
    ),
    "ru": (
        "50,0\xa0% пикселей прозрачны или почти прозрачны и не учитываются: доли выше посчитаны "
        "по остальным пикселям."
    ),
}


@pytest.mark.parametrize("language", ["en", "ru"])
def test_every_lane_says_how_many_pixels_were_left_out_as_transparent(
    site, page, tmp_path, language
):
    # 80 × 60: the left half clear (and nearly: alpha 127), the right half opaque red and blue.
    image = Image.new("RGBA", (80, 60), (0, 0, 0, 0))
    image.paste((10, 200, 30, 127), (0, 0, 40, 30))
    image.paste((200, 40, 60, 255), (40, 0, 80, 30))
    image.paste((20, 120, 220, 200), (40, 30, 80, 60))
    path = tmp_path / "half-clear.png"
    image.save(path)
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", str(path))
    page.wait_for_selector("[data-run=server]:not([disabled])")
    notes = {}
    for lane in ("main", "worker", "server"):
        run_lane(page, lane)
        notes[lane] = page.eval_on_selector(
            f"[data-lane={lane}] [data-transparent]",
            "(p) => p.checkVisibility() ? p.textContent : null",
        )
    assert notes == dict.fromkeys(("main", "worker", "server"), TRANSPARENT[language])
    # An opaque photo says nothing of the kind.
    page.set_input_files("#demo-file", write_small_png(tmp_path))
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, "main")
    assert page.is_hidden("[data-lane=main] [data-transparent]")
    assert csp_violations(page) == []
