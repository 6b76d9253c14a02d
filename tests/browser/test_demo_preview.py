"""Choosing a very large photo: the page says at once that it is reading it, never freezes to
show it, and says why the server lane stays off when the photo is over that lane's limits."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo

pytestmark = pytest.mark.browser

PREFIX = {"en": "", "ru": "/ru", "de": "/de"}
# Longer than this and a visitor sees the page hang, not merely stutter.
FROZEN_MS = 200


@pytest.fixture(scope="module")
def huge_png(tmp_path_factory) -> str:
    """A 9000 × 9000 PNG (81 megapixels) of stripes: a quarter of a megabyte on disk, 324 MB
    once decoded."""
    image = Image.new("RGB", (9000, 9000), (30, 90, 160))
    draw = ImageDraw.Draw(image)
    for at in range(0, 9000, 600):
        draw.rectangle([at, 0, at + 299, 8999], fill=(220, 180, 40))
        draw.rectangle([0, at, 8999, at + 149], fill=(200, 40, 60))
    path = tmp_path_factory.mktemp("photos") / "huge.png"
    image.save(path, compress_level=9)
    return str(path)


# Every frame's length from now on, and what the figure showed on the first frame drawn after
# the file was chosen (this listener runs after the page's own).
START_WATCHING = """() => {
    window.__frames = [];
    window.__watching = true;
    let last = null;
    const tick = (now) => {
        if (last !== null) window.__frames.push(now - last);
        last = now;
        if (window.__watching) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    document.getElementById("demo-file").addEventListener("change", () => {
        requestAnimationFrame(() => {
            const status = document.querySelector("[data-preview-status]");
            window.__firstFrame = {
                status: status ? status.textContent : null,
                shown: Boolean(status && status.checkVisibility()),
            };
        });
    }, { once: true });
}"""
# Sixty more frames (a second when nothing stalls), so the preview's own paint is counted, then
# the frames' lengths.
STOP_WATCHING = """() => new Promise((resolve) => {
    let left = 60;
    const tick = () => {
        left -= 1;
        if (left > 0) requestAnimationFrame(tick);
        else { window.__watching = false; resolve(window.__frames); }
    };
    requestAnimationFrame(tick);
})"""

CAPTION_READY = (
    "() => document.querySelector('[data-preview-caption]').textContent.startsWith('9000 × 9000')"
)

TOO_MANY_PIXELS = {
    "en": (
        "This photo has 81 million pixels; the server lane takes at most 50 million, so it "
        "stays off. Scale the photo down to 50 megapixels or fewer to run it there; the two "
        "browser lanes can run it as it is."
    ),
    "ru": (
        "В этом фото 81 млн пикселей, а серверная дорожка принимает не больше 50 млн, поэтому "
        "она отключена. Уменьшите фото до 50 мегапикселей или меньше, чтобы запустить его на "
        "сервере; обе браузерные дорожки обработают его как есть."
    ),
}


def test_choosing_a_9000_px_png_never_freezes_the_page_and_says_at_once_it_is_reading(
    site, page, huge_png
):
    open_demo(page, site)
    # Where a visitor choosing a photo is: off screen, the browser would not paint the preview.
    page.locator(".demo-stage").scroll_into_view_if_needed()
    page.evaluate(START_WATCHING)
    page.set_input_files("#demo-file", huge_png)
    page.wait_for_function(CAPTION_READY, timeout=60_000)
    frames = page.evaluate(STOP_WATCHING)
    first = page.evaluate("() => window.__firstFrame")

    assert len(frames) > 60
    assert max(frames) < FROZEN_MS, sorted(frames)[-5:]
    assert first == {"status": "Reading the photo…", "shown": True}
    # The preview is a small copy, not the photo's 81 megapixels.
    drawn = page.eval_on_selector(
        "[data-preview-image]", "(c) => [c.width, c.height, c.checkVisibility()]"
    )
    density = page.evaluate("() => window.devicePixelRatio")
    assert drawn == [round(256 * density), round(256 * density), True]
    assert page.is_hidden("[data-preview-status]")
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_photo_over_the_servers_pixel_limit_turns_only_the_server_lane_off_saying_what_to_do(
    site, page, huge_png, language
):
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", huge_png)
    page.wait_for_function(CAPTION_READY, timeout=60_000)
    disabled = page.eval_on_selector_all("[data-run]", "(bs) => bs.map((b) => b.disabled)")
    assert disabled == [False, False, True]
    assert page.text_content("[data-server-refusal]") == TOO_MANY_PIXELS[language]
    assert page.is_visible("[data-server-refusal]")
    assert page.is_hidden("[data-error]")
    assert csp_violations(page) == []
