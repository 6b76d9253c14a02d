"""Every number on the page in the page's language: "2,3 мс" in Russian, "2,3 ms" in German,
bytes grouped, percentages and megabytes as each language writes them — the demo's through
Intl, the server's through Django's localisation."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser

PREFIX = {"en": "", "ru": "/ru", "de": "/de"}
# Intl puts a no-break space (which one depends on the ICU version) between a number and its
# unit, and Russian groups digits with one: the patterns read every white space as " ".
MS = {
    "en": re.compile(r"^(\d{1,3}(,\d{3})*|\d\.\d) ms$"),
    "ru": re.compile(r"^(\d{1,3}( \d{3})*|\d,\d) мс$"),
    "de": re.compile(r"^(\d{1,3}(\.\d{3})*|\d,\d) ms$"),
}
# The 600 × 400 noise PNG below is about 700 KB: 0.7 MB.
CAPTION = {
    "en": re.compile(r"^600 × 400 px, 0\.\d MB$"),
    "ru": re.compile(r"^600 × 400 пкс, 0,\d МБ$"),
    "de": re.compile(r"^600 × 400 px, 0,\d MB$"),
}
PERCENT = {
    "en": re.compile(r" \d+\.\d%$"),
    "ru": re.compile(r" \d+,\d %$"),
    "de": re.compile(r" \d+,\d %$"),
}


@pytest.fixture(scope="module")
def noisy_png(tmp_path_factory) -> tuple[str, int]:
    """600 × 400 px of noise, a file of some 700 KB: its size needs grouping to read."""
    rng = np.random.default_rng(8)
    image = rng.integers(0, 256, size=(400, 600, 3), dtype=np.uint8)
    image[:200] = (200, 40, 60)
    path = tmp_path_factory.mktemp("photos") / "noisy.png"
    Image.fromarray(image).save(path)
    return str(path), path.stat().st_size


@pytest.fixture(scope="module")
def tiny_png(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("photos") / "tiny.png"
    Image.new("RGB", (8, 6), (30, 140, 200)).save(path)
    return str(path)


def spaced(text: str) -> str:
    return " ".join(text.split())


def grouped(value: int, language: str) -> str:
    separator = {"en": ",", "ru": " ", "de": "."}[language]
    return f"{value:,}".replace(",", separator)


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_the_demos_numbers_are_written_the_way_the_pages_language_writes_them(
    site, page, noisy_png, tiny_png, language
):
    path, size = noisy_png
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", path)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    page.wait_for_function(
        "() => document.querySelector('[data-preview-caption]').textContent !== ''"
    )
    assert CAPTION[language].match(spaced(page.text_content("[data-preview-caption]")))
    run_lane(page, "main")
    run_lane(page, "worker")

    for lane in ("main", "worker"):
        for stat in ("decode", "analysis", "work", "frame"):
            shown = spaced(page.text_content(f"[data-lane={lane}] [data-stat={stat}]"))
            assert MS[language].match(shown), (lane, stat, shown)

    transfer = spaced(page.text_content("[data-lane=worker] [data-stat=transfer]"))
    unit = {"en": "bytes", "ru": "байт", "de": "Byte"}[language]
    assert transfer == f"{grouped(size, language)} {unit} → 0 {unit}"

    *swatches, other = page.eval_on_selector_all(
        "[data-lane=main] [data-legend] li", "(lis) => lis.map((li) => li.innerText)"
    )
    assert len(swatches) == 6
    for item in swatches:
        assert PERCENT[language].search(spaced(item)), item
    assert PERCENT[language].search(spaced(other).split(":")[0]), other

    # Under 10 ms a time has a decimal: the palette of 48 pixels takes well under that.
    page.set_input_files("#demo-file", tiny_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    run_lane(page, "main")
    analysis = spaced(page.text_content("[data-lane=main] [data-stat=analysis]"))
    decimal = {"en": ".", "ru": ",", "de": ","}[language]
    assert re.match(rf"^\d{re.escape(decimal)}\d ", analysis), analysis
    assert csp_violations(page) == []


@pytest.mark.parametrize(
    ("language", "batch", "jitter"),
    [("en", "1,500", "(±15%)"), ("ru", "1 500", "(±15 %)"), ("de", "1.500", "(±15 %)")],
)
def test_the_policy_grid_numbers_go_through_djangos_localisation(
    site, page, settings, language, batch, jitter
):
    # The server thread reads the same settings object.
    settings.DELIVERY_BATCH_SIZE = 1500
    page.goto(site.url + PREFIX[language] + PAGE)
    tiles = page.eval_on_selector_all(".policy dd", "(dds) => dds.map((dd) => dd.textContent)")
    assert spaced(tiles[0]) == batch
    assert spaced(tiles[3]).endswith(jitter)
    assert csp_violations(page) == []
