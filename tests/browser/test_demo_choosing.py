"""Choosing a photo: a file no lane can read is refused there and then, in the page's
language, with the Run buttons off and nothing left of the previous photo."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo

pytestmark = pytest.mark.browser


NOT_AN_IMAGE = {
    "en": "That file is not an image. Choose a JPEG, PNG or WebP photo.",
    "ru": "Этот файл — не изображение. Выберите фото в JPEG, PNG или WebP.",
}
EMPTY = {
    "en": "That file is empty (0 bytes). Choose a JPEG, PNG or WebP photo.",
    "ru": "Этот файл пуст (0 байт). Выберите фото в JPEG, PNG или WebP.",
}
UNSUPPORTED = {
    "en": (
        "The demo reads only JPEG, PNG and WebP photos: all three lanes must read the same "
        "photo, and the server lane reads no other format. Choose a photo in one of these."
    ),
    "ru": (
        "Демо читает только фото в JPEG, PNG и WebP: все три дорожки должны читать одно и то "
        "же фото, а серверная дорожка других форматов не читает. Выберите фото в одном из них."
    ),
}
UNDECODABLE = {
    "en": (
        "The browser could not decode this image; the file may be damaged or cut short. "
        "Choose another photo."
    ),
    "ru": (
        "Браузер не смог декодировать это изображение: возможно, файл повреждён или обрезан. "
        "Выберите другое фото."
    ),
}
PREFIX = {"en": "", "ru": "/ru"}


def open_with_a_photo(page, site, language: str, photo: str) -> None:
    """Open the demo and choose a good photo first, so there is a preview to be replaced."""
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", photo)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    page.wait_for_function(
        "() => document.querySelector('[data-preview-caption]').textContent.startsWith('80 × 60')"
    )


def refusal(page) -> dict:
    """Wait for the error, then return what the demo shows besides it."""
    error = page.wait_for_selector("[data-error]:not([hidden])", timeout=10_000)
    return {
        "error": error.text_content(),
        "disabled": page.eval_on_selector_all("[data-run]", "(bs) => bs.map((b) => b.disabled)"),
        "preview_hidden": page.eval_on_selector("[data-preview]", "(f) => f.hidden"),
        "preview_src": page.get_attribute("[data-preview-image]", "src"),
        "caption": page.text_content("[data-preview-caption]"),
    }


def refused_with(message: str) -> dict:
    return {
        "error": message,
        "disabled": [True, True, True],
        "preview_hidden": True,
        "preview_src": None,
        "caption": "",
    }


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def drop(page, *, name: str, data: bytes, mime: str) -> None:
    """Drop a file on the drop zone, as a visitor dragging it from their desktop does."""
    page.evaluate(
        """([name, data, mime]) => {
            const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type: mime }));
            document.querySelector("[data-dropzone]").dispatchEvent(
                new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }),
            );
        }""",
        [name, base64.b64encode(data).decode(), mime],
    )


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_text_file_named_jpg_is_refused_on_choosing(site, page, tmp_path, small_png, language):
    fake = tmp_path / "holiday.jpg"
    fake.write_text("these are notes, not a photo")
    open_with_a_photo(page, site, language, small_png)
    page.set_input_files("#demo-file", str(fake))
    assert refusal(page) == refused_with(NOT_AN_IMAGE[language])
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_an_empty_file_is_refused_on_choosing(site, page, tmp_path, small_png, language):
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    open_with_a_photo(page, site, language, small_png)
    page.set_input_files("#demo-file", str(empty))
    assert refusal(page) == refused_with(EMPTY[language])
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_gif_from_the_file_dialog_is_refused_naming_the_accepted_formats(
    site, page, tmp_path, small_png, language
):
    gif = tmp_path / "still.gif"
    gif.write_bytes(encoded(Image.new("RGB", (10, 10), (1, 2, 3)), "GIF"))
    open_with_a_photo(page, site, language, small_png)
    page.set_input_files("#demo-file", str(gif))
    assert refusal(page) == refused_with(UNSUPPORTED[language])
    assert csp_violations(page) == []


def test_a_dropped_gif_named_jpg_is_refused_by_what_its_bytes_are(site, page, small_png):
    open_with_a_photo(page, site, "en", small_png)
    gif = encoded(Image.new("RGB", (10, 10), (1, 2, 3)), "GIF")
    drop(page, name="photo.jpg", data=gif, mime="image/jpeg")
    assert refusal(page) == refused_with(UNSUPPORTED["en"])
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_damaged_jpeg_is_refused_on_choosing(site, page, small_png, language):
    open_with_a_photo(page, site, language, small_png)
    whole = encoded(Image.new("RGB", (64, 48), (200, 40, 60)), "JPEG")
    drop(page, name="cut.jpg", data=whole[:40], mime="image/jpeg")
    assert refusal(page) == refused_with(UNDECODABLE[language])
    assert csp_violations(page) == []


def test_a_good_photo_after_a_refused_one_is_taken(site, page, tmp_path, small_png):
    fake = tmp_path / "notes.png"
    fake.write_text("not a picture")
    open_demo(page, site)
    page.set_input_files("#demo-file", str(fake))
    page.wait_for_selector("[data-error]:not([hidden])", timeout=10_000)
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    assert page.is_hidden("[data-error]")
    assert page.is_visible("[data-preview-image]")
    assert page.text_content("[data-preview-caption]").startswith("80 × 60 px, ")
    assert page.eval_on_selector_all("[data-run]", "(bs) => bs.map((b) => b.disabled)") == [
        False,
        False,
        False,
    ]
    assert csp_violations(page) == []


POST_TO_SERVER = """async (withFile) => {
    const demo = document.getElementById("palette-demo");
    const body = new FormData();
    if (withFile) body.append("image", new File([], "empty.jpg", { type: "image/jpeg" }));
    const response = await fetch(demo.dataset.serverUrl, {
        method: "POST",
        body,
        headers: { "X-CSRFToken": document.querySelector("input[name=csrfmiddlewaretoken]").value },
    });
    return [response.status, (await response.json()).error];
}"""


@pytest.mark.parametrize(
    ("language", "empty", "missing"),
    [
        (
            "en",
            "The file you sent is empty (0 bytes): there is no image in it.",
            "Choose an image first.",
        ),
        (
            "ru",
            "Присланный файл пуст (0 байт): изображения в нём нет.",
            "Сначала выберите изображение.",
        ),
    ],
)
def test_the_server_tells_an_empty_upload_from_no_upload(site, page, language, empty, missing):
    # Chromium sends a 0-byte file as a part with a file name and no body; Django's parser
    # keeps such a part, so the server can say what it is.
    open_demo(page, site, PREFIX[language] + PAGE)
    assert page.evaluate(POST_TO_SERVER, True) == [400, empty]
    assert page.evaluate(POST_TO_SERVER, False) == [400, missing]
    assert csp_violations(page) == []


def padded_png(path: str, *, size: int) -> bytes:
    """The PNG at path, grown to size bytes by private chunks decoders skip: a photo every
    browser still reads, as large as asked."""
    data = Path(path).read_bytes()
    kind = b"prVt"
    left = size - len(data)
    chunks = []
    while left:
        # Decoders cap one chunk's size (libpng's default is 8 MB): pad with many.
        body = b"\0" * (min(left, 2**20) - 12)
        chunks.append(struct.pack(">I", len(body)) + kind + body)
        chunks.append(struct.pack(">I", zlib.crc32(kind + body)))
        left -= len(body) + 12
    # After the signature (8 bytes) and IHDR (25).
    return data[:33] + b"".join(chunks) + data[33:]


TOO_BIG_FOR_THE_SERVER = {
    "en": (
        "This file is 23.4 MB; the server lane takes files up to 20 MB, so it stays off. The "
        "two browser lanes can still run it."
    ),
    "de": (
        "Diese Datei ist 23,4 MB groß; die Server-Bahn nimmt Dateien bis 20 MB, deshalb bleibt "
        "sie aus. Die beiden Browser-Bahnen können sie trotzdem verarbeiten."
    ),
}


@pytest.mark.parametrize("language", ["en", "de"])
def test_a_file_over_the_servers_byte_limit_turns_only_the_server_lane_off_saying_why(
    site, page, small_png, language
):
    open_demo(page, site, {"en": "", "de": "/de"}[language] + PAGE)
    page.set_input_files(
        "#demo-file",
        files=[
            {
                "name": "large.png",
                "mimeType": "image/png",
                "buffer": padded_png(small_png, size=round(23.4 * 2**20)),
            }
        ],
    )
    page.wait_for_function(
        "() => document.querySelector('[data-preview-caption]').textContent.startsWith('80 × 60')"
    )
    disabled = page.eval_on_selector_all("[data-run]", "(bs) => bs.map((b) => b.disabled)")
    assert disabled == [False, False, True]
    refusal_note = page.text_content("[data-server-refusal]").replace("\u202f", " ")
    assert refusal_note.replace("\xa0", " ") == TOO_BIG_FOR_THE_SERVER[language]
    assert page.get_attribute("[data-run=server]", "aria-describedby") == "server-refusal"
    assert page.is_hidden("[data-error]")
    # The browser lanes still take it.
    page.click("[data-run=main]")
    page.wait_for_selector("[data-lane=main][data-done=true]", timeout=60_000)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    assert page.eval_on_selector("[data-run=server]", "(b) => b.disabled")
    # The next photo, within the limit, turns the server lane back on.
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=server]:not([disabled])")
    assert page.is_hidden("[data-server-refusal]")
    assert csp_violations(page) == []


def test_a_sample_arriving_after_another_photo_was_chosen_is_dropped(site, page, small_png):
    open_demo(page, site)
    held = []
    page.route("**/workers/sample.jpg", lambda route: held.append(route))
    page.click("[data-sample]")
    # Said at once, while the sample is still on its way.
    assert page.text_content("[data-preview-status]") == "Loading the sample photo…"
    assert page.is_visible("[data-preview-status]")
    page.set_input_files("#demo-file", small_png)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    assert len(held) == 1
    with page.expect_event("requestfinished"):
        held[0].continue_()
    # Time for the page to have read the sample's body and done what it does with it.
    page.evaluate(
        """() => new Promise((resolve) => {
            let left = 30;
            const tick = () => (--left > 0 ? requestAnimationFrame(tick) : resolve());
            requestAnimationFrame(tick);
        })"""
    )
    assert page.text_content("[data-preview-caption]").startswith("80 × 60 px, ")
    assert page.is_hidden("[data-preview-status]")
    assert page.eval_on_selector_all("[data-run]", "(bs) => bs.map((b) => b.disabled)") == [
        False,
        False,
        False,
    ]
    assert csp_violations(page) == []
