"""The server lane's refusal of an upload too dear to decode reaches the page as the server
wrote it, in the page's language, with nothing else in its place."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from tests.browser.conftest import csp_violations, photo
from tests.browser.test_demo_errors import failure, open_with_photo

pytestmark = pytest.mark.browser

REFUSAL = {
    "en": (
        "This PNG image has 50 megapixels; the server lane analyses PNG images like it of up to "
        "38 megapixels. Scale it down, or save it as JPEG."
    ),
    "ru": (
        "В этом изображении PNG 50 Мп, а серверная дорожка анализирует такие изображения PNG "
        "размером до 38 Мп. Уменьшите его или сохраните в JPEG."
    ),
}


@photo("one-bit.png", optimize=True)
def one_bit_bomb() -> Image.Image:
    """A 1-bit 7070 × 7070 PNG of about 6 KB."""
    image = Image.new("1", (7070, 7070))
    draw = ImageDraw.Draw(image)
    for top in range(0, 7070, 707):
        draw.line((0, top, 7069, top), fill=1, width=3)
    return image


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_png_over_the_servers_price_is_refused_in_the_pages_language(
    site, page, one_bit_bomb, language
):
    open_with_photo(page, site, language, one_bit_bomb)
    message, _tooltip = failure(page, "server")
    assert message == REFUSAL[language]
    assert csp_violations(page) == []
