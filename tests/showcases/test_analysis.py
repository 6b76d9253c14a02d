"""The server lane's decoding: priced before it starts, bit-identical to a whole-image resize,
and a 4xx (never a 500) for whatever a broken file does to the decoders."""

from __future__ import annotations

import functools
import io
import itertools
import logging
import random
import re
import struct
import threading
import zlib
from datetime import timedelta

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import translation
from PIL import Image, ImageDraw, ImageFile, JpegImagePlugin

from showcases import analysis, palette
from showcases.analysis import (
    MAX_DECODE_BYTES,
    DecodeCost,
    UploadError,
    jpeg_price,
    native_bytes,
    peak_bytes,
    pillow_webp_cost,
    png_price,
    shrink,
    target_size,
    webp_cost,
    webp_price,
)

URL = "/showcases/workers/analyse/"


@pytest.fixture(autouse=True)
def in_english():
    # A request to /ru/ leaves Russian active in this thread; the messages below are English.
    with translation.override("en"):
        yield


def encoded(image: Image.Image, fmt: str, **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def photo(size: tuple[int, int], *, seed: int = 1) -> Image.Image:
    """Smooth colour with a little grain, like a photograph."""
    width, height = size
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    rgb = np.stack(
        [
            120 + 100 * np.sin(x / (width / 5 + 1)),
            110 + 90 * np.cos(y / (height / 4 + 1)),
            90 + 60 * np.sin((x + y) / (width / 3 + 1)),
        ],
        axis=-1,
    )
    rgb += np.random.default_rng(seed).normal(0, 8, size=rgb.shape)
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def refused(data: bytes) -> UploadError:
    with pytest.raises(UploadError) as caught:
        analysis.analyse(data)
    return caught.value


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def with_png_chunks(data: bytes, chunks: list[bytes]) -> bytes:
    """Return the PNG with chunks inserted right after its IHDR."""
    after_ihdr = 8 + 12 + 13
    return data[:after_ihdr] + b"".join(chunks) + data[after_ihdr:]


def with_png_size(data: bytes, size: tuple[int, int]) -> bytes:
    """Return the PNG with its IHDR claiming another size (and a CRC that agrees)."""
    ihdr = data[16:29]
    return data[:8] + png_chunk(b"IHDR", struct.pack(">II", *size) + ihdr[8:]) + data[33:]


def with_jpeg_size(data: bytes, size: tuple[int, int]) -> bytes:
    """Return the JPEG with its SOF claiming another size."""
    sof = re.search(rb"\xff[\xc0\xc2]", data).start()
    width, height = size
    return data[: sof + 5] + struct.pack(">HH", height, width) + data[sof + 9 :]


# --- The budget arithmetic ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "size", "expected"),
    [
        ("1", (8000, 6200), 49_600_000),  # one byte a pixel in memory, not one bit
        ("L", (4000, 3000), 12_000_000),
        ("P", (4000, 3000), 12_000_000),
        ("I;16", (4000, 3000), 24_000_000),
        ("LA", (4000, 3000), 48_000_000),
        ("RGB", (4000, 3000), 48_000_000),  # stored as four bytes a pixel
        ("RGBA", (4000, 3000), 48_000_000),
        ("CMYK", (4000, 3000), 48_000_000),
    ],
)
def test_native_bytes_are_pixels_times_the_modes_bytes_in_memory(mode, size, expected):
    assert native_bytes(size=size, mode=mode) == expected


@pytest.mark.parametrize(
    "mode",
    ["1", "L", "P", "I;16", "I;16B", "LA", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "I", "F"],
)
def test_the_bytes_per_pixel_are_the_ones_pillow_allocates(mode):
    # With 4 KB blocks and 1024-pixel rows, the blocks Pillow allocates tell its row size.
    core = Image.core
    block_size = core.get_block_size()
    core.set_block_size(4096)
    try:
        core.reset_stats()
        Image.new(mode, (1024, 64))
        stats = core.get_stats()
    finally:
        core.set_block_size(block_size)
    blocks = stats["allocated_blocks"] + stats["reused_blocks"]
    assert blocks * 4096 == native_bytes(size=(1024, 64), mode=mode)


def test_the_peak_of_a_12_mp_png_adds_the_reduced_copy_a_band_and_the_result():
    cost = DecodeCost(native=native_bytes(size=(4000, 3000), mode="RGB"))
    # Reduced 2 × 2 to 2000 × 1500 RGBa; bands of 130 rows as RGBA and RGBa; 720 × 540 twice.
    expected = 48_000_000 + 2000 * 1500 * 4 + 4000 * 130 * 8 + 720 * 540 * 8
    assert peak_bytes(cost, size=(4000, 3000), target=(720, 540)) == expected


def test_what_a_decoder_frees_when_it_ends_overlaps_with_the_shrinking():
    size, target = (4000, 3000), (720, 540)
    shrinking = peak_bytes(DecodeCost(native=0), size=size, target=target)
    small = DecodeCost(native=10, transient=shrinking - 1)
    large = DecodeCost(native=10, transient=shrinking + 1)
    assert peak_bytes(small, size=size, target=target) == 10 + shrinking
    assert peak_bytes(large, size=size, target=target) == 10 + shrinking + 1


PHONE = (4080, 3072)  # 12.5 MP, the largest "12 MP" phone photos


@pytest.mark.parametrize(
    ("cost", "size", "target", "accepted"),
    [
        (webp_cost(size=PHONE, argb=True), PHONE, (720, 542), True),
        (webp_cost(size=PHONE, argb=False), PHONE, (720, 542), True),
        (DecodeCost(native=native_bytes(size=PHONE, mode="RGBA")), PHONE, (720, 542), True),
        (DecodeCost(native=native_bytes(size=PHONE, mode="I;16")), PHONE, (720, 542), True),
        # A progressive 4:4:4 JPEG drafted to 1/4: libjpeg's coefficients are full size.
        (
            DecodeCost(native=1020 * 768 * 4, transient=510 * 384 * 3 * 128),
            (1020, 768),
            (720, 542),
            True,
        ),
        (
            DecodeCost(native=native_bytes(size=(8000, 6200), mode="1")),
            (8000, 6200),
            (720, 558),
            True,
        ),
        (
            DecodeCost(native=native_bytes(size=(5600, 4200), mode="RGB")),
            (5600, 4200),
            (720, 540),
            True,
        ),
        (
            DecodeCost(native=native_bytes(size=(6000, 4500), mode="RGB")),
            (6000, 4500),
            (720, 540),
            False,
        ),
        (webp_cost(size=(8000, 6200), argb=True), (8000, 6200), (720, 558), False),
        # An animated WebP goes through Pillow's plugin, at 20 bytes a pixel.
        (pillow_webp_cost(size=PHONE), PHONE, (720, 542), False),
        (pillow_webp_cost(size=(2000, 1500)), (2000, 1500), (720, 540), True),
        # 48 MP progressive 4:2:0: 1000 × 750 luma blocks and two chroma planes of 500 × 375.
        (
            DecodeCost(native=1000 * 750 * 4, transient=1_125_000 * 128),
            (1000, 750),
            (720, 540),
            False,
        ),
        # Sixty-four zTXt chunks of a MB each, held as four bytes a character.
        (DecodeCost(native=64 * 64, kept=4 * 64 * 2**20), (64, 64), (64, 64), False),
    ],
    ids=[
        "12 MP lossless webp",
        "12 MP lossy webp",
        "12 MP RGBA png",
        "12 MP 16-bit grey png",
        "12 MP progressive jpeg",
        "50 MP 1-bit png",
        "23 MP RGB png",
        "27 MP RGB png",
        "50 MP lossless webp",
        "12 MP animated webp",
        "3 MP animated webp",
        "48 MP progressive jpeg",
        "png text bomb",
    ],
)
def test_the_budget_takes_every_12_mp_phone_photo_and_refuses_the_bombs(
    cost, size, target, accepted
):
    assert (peak_bytes(cost, size=size, target=target) <= MAX_DECODE_BYTES) is accepted


@pytest.mark.parametrize(
    ("subsampling", "expected_blocks"),
    # 400 × 300: luma 50 × 38 blocks (38 rounds up to 2 × 19 MCUs at 4:2:0), chroma 25 × 19.
    [(2, 50 * 38 + 2 * 25 * 19), (0, 3 * 50 * 38)],
    ids=["4:2:0", "4:4:4"],
)
def test_a_progressive_jpeg_is_charged_libjpegs_whole_coefficient_buffer(
    subsampling, expected_blocks
):
    image = photo((400, 300))
    progressive = encoded(image, "JPEG", progressive=True, subsampling=subsampling)
    baseline = encoded(image, "JPEG", subsampling=subsampling)
    assert analysis._walk(progressive).coefficient_bytes == expected_blocks * 128
    assert analysis._walk(baseline).coefficient_bytes == 0


# --- Shrinking in bands -------------------------------------------------------------------


def _in_mode(mode: str, size: tuple[int, int]) -> Image.Image:
    rng = np.random.default_rng(sum(size))
    rgba = rng.integers(0, 256, size=(size[1], size[0], 4), dtype=np.uint8)
    rgba[::7, :, 3] = 0  # fully transparent rows and opaque ones: premultiplying must agree
    rgba[::5, :, 3] = 255
    image = Image.fromarray(rgba)
    if mode == "RGBA":
        return image
    if mode in {"P", "P+transparency"}:
        paletted = image.convert("RGB").quantize(48)
        if mode == "P+transparency":
            paletted.info["transparency"] = bytes(range(0, 240, 5))
        return paletted
    if mode == "RGB+transparency":
        rgb = image.convert("RGB")
        rgb.info["transparency"] = tuple(int(v) for v in rgba[0, 0, :3])
        return rgb
    if mode == "I;16":
        return image.convert("L").convert("I;16")
    return image.convert(mode)


@pytest.mark.parametrize(
    "mode",
    ["RGBA", "RGB", "L", "LA", "1", "P", "P+transparency", "RGB+transparency", "I;16", "CMYK"],
)
@pytest.mark.parametrize(
    "size",
    # Factors 2 × 2; 4 × 4 and 6 × 8 with partial last blocks; none (1 × 1); tall.
    [(2900, 41), (6000, 25), (4500, 17), (1500, 1100), (37, 3100)],
)
@pytest.mark.parametrize("band_pixels", [analysis.BAND_PIXELS, 3000], ids=["bands", "thin bands"])
def test_shrinking_in_bands_gives_the_very_pixels_of_a_whole_image_resize(
    monkeypatch, mode, size, band_pixels
):
    monkeypatch.setattr(analysis, "BAND_PIXELS", band_pixels)
    image = _in_mode(mode, size)
    target = target_size(size)
    whole = image.convert("RGBA").resize(target, Image.Resampling.BILINEAR, reducing_gap=2.0)
    banded = shrink(image, target)
    assert banded.mode == "RGBA"
    assert banded.size == target
    assert np.array_equal(np.asarray(banded), np.asarray(whole))


def test_an_image_already_small_enough_is_only_converted():
    image = _in_mode("LA", (300, 200))
    assert np.array_equal(np.asarray(shrink(image, (300, 200))), np.asarray(image.convert("RGBA")))


# --- JPEG and MPO -------------------------------------------------------------------------


@pytest.fixture
def drafts(monkeypatch) -> list:
    seen = []
    original = JpegImagePlugin.JpegImageFile.draft

    def draft(self, mode, size):
        requested = (self.format, self.size, mode, size)
        result = original(self, mode, size)
        seen.append((*requested, self.size))
        return result

    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft", draft)
    return seen


def test_an_mpo_is_decoded_from_the_dct_at_reduced_size_like_a_jpeg(drafts):
    picture = photo((2400, 1800))
    mpo = encoded(picture, "MPO", save_all=True, append_images=[photo((600, 450), seed=2)])
    jpeg = encoded(picture, "JPEG")
    from_mpo = analysis.analyse(mpo)
    from_jpeg = analysis.analyse(jpeg)
    assert drafts == [
        ("MPO", (2400, 1800), "RGB", (720, 540), (1200, 900)),
        ("JPEG", (2400, 1800), "RGB", (720, 540), (1200, 900)),
    ]
    # The MPO's first frame is the JPEG's very bitstream, so the palettes agree to the bit.
    assert from_mpo["swatches"] == from_jpeg["swatches"]
    assert from_mpo["luminance"] == from_jpeg["luminance"]


def test_an_mpo_is_walked_only_up_to_the_end_of_its_first_frame():
    picture = photo((400, 300))
    mpo = encoded(
        picture, "MPO", save_all=True, append_images=[photo((400, 300), seed=2)], progressive=True
    )
    first = encoded(picture, "JPEG", progressive=True)
    assert analysis._walk(mpo).scans == analysis._walk(first).scans


# --- WebP through libwebp -----------------------------------------------------------------


def test_libwebp_is_found_beside_pillows_webp_module():
    assert analysis._LIBWEBP is not None


WEBP_KINDS = ["lossy", "lossless", "lossy with alpha", "lossless with alpha"]


@functools.cache
def _webps() -> dict[str, bytes]:
    picture = photo((300, 200))
    with_alpha = picture.copy()
    with_alpha.putalpha(
        Image.fromarray((np.arange(200 * 300) % 256).astype(np.uint8).reshape(200, 300))
    )
    return {
        "lossy": encoded(picture, "WEBP", quality=80),
        "lossless": encoded(picture, "WEBP", lossless=True),
        "lossy with alpha": encoded(with_alpha, "WEBP", quality=80),
        "lossless with alpha": encoded(with_alpha, "WEBP", lossless=True),
    }


@pytest.mark.parametrize("kind", WEBP_KINDS)
def test_libwebp_decodes_the_pixels_pillows_webp_plugin_does(kind):
    data = _webps()[kind]
    ours = analysis._decode_webp(data, size=(300, 200))
    pillows = Image.open(io.BytesIO(data)).convert("RGBA")
    assert ours.mode == "RGBA"
    assert np.array_equal(np.asarray(ours), np.asarray(pillows))


def test_without_libwebp_a_webp_goes_through_pillows_plugin_to_the_same_palette(monkeypatch):
    data = encoded(photo((1600, 1200)), "WEBP", lossless=True)
    direct = analysis.analyse(data)
    monkeypatch.setattr(analysis, "_LIBWEBP", None)
    through_pillow = analysis.analyse(data)
    assert through_pillow["swatches"] == direct["swatches"]
    assert through_pillow["luminance"] == direct["luminance"]


def test_an_animated_webp_is_analysed_from_its_first_frame():
    first, second = photo((200, 150)), photo((200, 150), seed=5)
    data = encoded(first, "WEBP", save_all=True, append_images=[second], lossless=True)
    expected = palette.dominant_colors(np.asarray(first.convert("RGBA")))
    assert analysis.analyse(data)["swatches"] == expected


# --- Refusals -----------------------------------------------------------------------------


def _vp8l_with_size(size: tuple[int, int]) -> bytes:
    """A lossless WebP whose header claims size: libwebp reads it without decoding."""
    data = bytearray(encoded(Image.new("RGB", (8, 8), (20, 80, 160)), "WEBP", lossless=True))
    assert data[12:16] == b"VP8L"
    width, height = size
    bits = struct.unpack_from("<I", data, 21)[0] & ~((1 << 28) - 1)
    struct.pack_into("<I", data, 21, bits | (width - 1) | (height - 1) << 14)
    return bytes(data)


def test_a_tiny_webp_claiming_50_mp_is_refused_before_it_is_decoded():
    error = refused(_vp8l_with_size((8000, 6200)))
    assert error.status == 413
    assert "would take 426 MB of memory, more than the 112 MB" in error.message


def test_a_png_claiming_more_than_the_budget_is_refused_before_it_is_decoded():
    data = with_png_size(encoded(photo((64, 48)), "PNG"), (6000, 4500))
    error = refused(data)
    assert error.status == 413
    assert "Decoding this image would take" in error.message


def test_a_large_progressive_jpeg_is_refused_and_a_large_baseline_one_is_not():
    progressive = with_jpeg_size(encoded(photo((64, 48)), "JPEG", progressive=True), (8000, 6000))
    baseline = with_jpeg_size(encoded(photo((64, 48)), "JPEG"), (8000, 6000))
    assert refused(progressive).status == 413
    # libjpeg decodes the baseline one at 1/8 size (filling in what its short data lacks).
    result = analysis.analyse(baseline)
    assert (result["sourceWidth"], result["width"]) == (8000, 720)


def test_png_text_that_would_decompress_past_the_budget_is_refused():
    bomb = b"note\x00\x00" + zlib.compress(b"a" * 2**20, 9)
    data = with_png_chunks(encoded(photo((64, 48)), "PNG"), [png_chunk(b"zTXt", bomb)] * 40)
    assert len(data) < 100_000
    error = refused(data)
    assert error.status == 413
    assert "Decoding this image would take" in error.message


def test_a_png_with_ordinary_text_is_analysed():
    chunk = png_chunk(b"zTXt", b"Comment\x00\x00" + zlib.compress(b"made on a phone"))
    assert analysis.analyse(with_png_chunks(encoded(photo((64, 48)), "PNG"), [chunk]))["swatches"]


@pytest.mark.parametrize(
    "data",
    [
        # 2,000 empty chunks in 30 KB: Pillow would walk each in Python.
        with_png_chunks(encoded(photo((64, 48)), "PNG"), [png_chunk(b"prVt", b"")] * 2000),
        # The 20 MB PNG of one-byte IDAT chunks, scaled down.
        b"".join(
            [
                encoded(photo((64, 48)), "PNG")[:33],
                *(png_chunk(b"IDAT", bytes([b])) for b in zlib.compress(random.randbytes(9264))),
                png_chunk(b"IEND", b""),
            ]
        ),
        # Empty APP1 segments and fill bytes before the first scan.
        b"\xff\xd8" + b"\xff\xe1\x00\x02" * 3000 + encoded(photo((64, 48)), "JPEG")[2:],
        b"\xff\xd8" + b"\xff" * 50_000 + encoded(photo((64, 48)), "JPEG")[2:],
    ],
    ids=["png empty chunks", "png one-byte IDATs", "jpeg empty segments", "jpeg fill bytes"],
)
def test_a_file_of_absurdly_many_parts_for_its_size_is_refused(data):
    error = refused(data)
    assert error.status == 413
    assert "too many parts for its size" in error.message


def _with_scans(data: bytes, total: int) -> bytes:
    """Return the progressive JPEG with empty scans added until it has total."""
    have = analysis._walk(data).scans
    empty_scan = bytes.fromhex("ffda0008010100013f10")
    return data[:-2] + empty_scan * (total - have) + data[-2:]


def test_a_jpeg_may_have_64_scans_but_not_65():
    data = encoded(photo((64, 48)), "JPEG", progressive=True)
    assert analysis.analyse(_with_scans(data, 64))["swatches"]
    error = refused(_with_scans(data, 65))
    assert error.status == 413
    assert "too many parts" in error.message


def test_an_apng_is_walked_only_up_to_its_second_frame():
    frames = [photo((8, 8), seed=n) for n in range(400)]
    data = encoded(frames[0], "PNG", save_all=True, append_images=frames[1:])
    # More chunks than the limit allows for its size, but Pillow reads only the first frame's.
    assert len(_parts("PNG", data)[1]) > analysis.MAX_PARTS + len(data) // analysis.BYTES_PER_PART
    assert analysis._walk(data).parts < 10
    assert analysis.analyse(data)["swatches"]


BROKEN = "The image could not be decoded; the file may be damaged or cut short."


def test_what_a_decoder_raises_on_a_broken_file_is_a_400_with_its_words_apart():
    data = encoded(photo((300, 200)), "WEBP")
    error = refused(data[:-200])
    assert (error.status, error.message) == (400, BROKEN)
    # The decoder's own words are English whatever the request's language: a detail of
    # their own, kept out of the translated message.
    assert error.detail


def png_header(size: tuple[int, int], *, depth: int = 8) -> bytes:
    """A PNG's signature and IHDR (8-bit RGB unless told), and nothing else."""
    return b"\x89PNG\r\n\x1a\n" + png_chunk(
        b"IHDR", struct.pack(">IIBBBBB", *size, depth, 2, 0, 0, 0)
    )


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n",
        png_header((4, 4)) + png_chunk(b"IEND", b""),
        png_header((0, 0)) + png_chunk(b"IEND", b""),
        png_header((4, 4), depth=3) + png_chunk(b"IEND", b""),
        b"\xff\xd8\xff\xe0" + b"\0" * 20,
        b"RIFF" + struct.pack("<I", 20) + b"WEBPVP8 " + b"\0" * 12,
    ],
    ids=["png signature alone", "png without data", "png 0x0", "png bit depth 3", "jpeg", "webp"],
)
def test_a_damaged_file_whose_signature_names_an_accepted_format_could_not_be_decoded(data):
    error = refused(data)
    assert (error.status, error.message) == (400, BROKEN)
    assert error.detail


def test_a_file_of_another_format_is_refused_as_unsupported():
    error = refused(encoded(photo((16, 16)), "GIF"))
    assert (error.status, error.message) == (415, "Only PNG, JPEG and WebP images can be analysed.")


def test_an_unexpected_decoder_error_is_a_400_and_a_logged_traceback(monkeypatch, caplog):
    def broken(self, *args, **kwargs):
        raise RuntimeError("a decoder bug")

    monkeypatch.setattr(Image.Image, "convert", broken)
    with caplog.at_level(logging.ERROR, logger="showcases.analysis"):
        error = refused(encoded(photo((64, 48)), "PNG"))
    assert (error.status, error.message, error.detail) == (400, BROKEN, "a decoder bug")
    [record] = caplog.records
    assert record.exc_info[0] is RuntimeError


def test_an_error_after_decoding_is_not_mistaken_for_a_broken_file(monkeypatch):
    def broken(pixels, count=6):
        raise RuntimeError("a palette bug")

    monkeypatch.setattr(palette, "dominant_colors", broken)
    with pytest.raises(RuntimeError, match="a palette bug"):
        analysis.analyse(encoded(photo((64, 48)), "PNG"))


# --- The price in CPU time ----------------------------------------------------------------


@functools.cache
def one_bit_bomb() -> bytes:
    """A 1-bit 7070 × 7070 PNG of about 6 KB: ten white lines on black, 50 megapixels to
    decode."""
    image = Image.new("1", (7070, 7070))
    draw = ImageDraw.Draw(image)
    for top in range(0, 7070, 707):
        draw.line((0, top, 7069, top), fill=1, width=3)
    return encoded(image, "PNG", optimize=True)


@pytest.mark.parametrize(
    ("price", "expected_ms", "largest_megapixels"),
    [
        # 49,984,900 px × 5 ns = 249.9 ms, + 8 = 257.9 → 258; (200 − 8) / 5 = 38.4 → 38
        (png_price(size=(7070, 7070), mode="1"), 258, 38),
        # 3,000,000 px × 8 ns = 24 ms, + 8 = 32; 192 / 8 = 24
        (png_price(size=(2000, 1500), mode="L"), 32, 24),
        (png_price(size=(2000, 1500), mode="P"), 32, 24),
        # 3,000,000 × 12 = 36, + 8 = 44; 192 / 12 = 16
        (png_price(size=(2000, 1500), mode="I;16"), 44, 16),
        # 12,000,000 × 15 = 180, + 8 = 188; 192 / 15 = 12.8 → 12
        (png_price(size=(4000, 3000), mode="RGB"), 188, 12),
        # 12,000,000 × 18 = 216, + 8 = 224; 192 / 18 = 10.7 → 10
        (png_price(size=(4000, 3000), mode="RGBA"), 224, 10),
        (png_price(size=(4000, 3000), mode="I"), 224, 10),  # a mode not listed: the widest
        # interlaced: 12,000,000 × (15 + 3) = 216, + 8 = 224; 192 / 18 = 10.7 → 10
        (png_price(size=(4000, 3000), mode="RGB", interlaced=True), 224, 10),
        # 36,000,000 × (5 + 3) = 288, + 8 = 296; 192 / 8 = 24
        (png_price(size=(6000, 6000), mode="1", interlaced=True), 296, 24),
        # 12,000,000 × 3 = 36, + 1000 × 750 × 13 = 9.75, + 8 = 53.75 → 54; (192 − 9.75) / 3 → 60
        (jpeg_price(size=(4000, 3000), decoded=(1000, 750), multi_scan=False), 54, 60),
        # 12,000,000 × 10 = 120, + 9.75, + 8 = 137.75 → 138; (192 − 9.75) / 10 = 18.2 → 18
        (jpeg_price(size=(4000, 3000), decoded=(1000, 750), multi_scan=True), 138, 18),
        # the sample photo: 3,840,000 × 3 = 11.52, + 1200 × 800 × 13 = 12.48, + 8 = 32 exactly
        (jpeg_price(size=(2400, 1600), decoded=(1200, 800), multi_scan=False), 32, 59),
        # 12,000,000 × 12 = 144, + 8 = 152; 192 / 12 = 16
        (webp_price(size=(4000, 3000), argb=False), 152, 16),
        # 12,000,000 × 20 = 240, + 8 = 248; 192 / 20 = 9.6 → 9
        (webp_price(size=(4000, 3000), argb=True), 248, 9),
        # 1 px × 15 ns + 8 ms (the palette of the result) = 8.000015 → 9
        (png_price(size=(1, 1), mode="RGB"), 9, 12),
    ],
)
def test_an_upload_is_priced_from_its_format_and_declared_pixels(
    price, expected_ms, largest_megapixels
):
    assert price.milliseconds == expected_ms
    assert price.largest_megapixels() == largest_megapixels


@pytest.fixture
def decodes(monkeypatch) -> list:
    """Every Pillow load() and libwebp decode from here on."""
    calls = []
    load, decode_webp = ImageFile.ImageFile.load, analysis._decode_webp

    def recorded_load(image):
        calls.append(("load", image.format, image.size))
        return load(image)

    def recorded_webp(data, *, size):
        calls.append(("libwebp", "WEBP", size))
        return decode_webp(data, size=size)

    monkeypatch.setattr(ImageFile.ImageFile, "load", recorded_load)
    monkeypatch.setattr(analysis, "_decode_webp", recorded_webp)
    return calls


def test_a_one_bit_png_of_50_megapixels_is_refused_unread_with_what_to_do(decodes):
    data = one_bit_bomb()
    assert len(data) < 8 * 1024
    error = refused(data)
    assert error.status == 413
    assert error.message == (
        "This PNG image has 50 megapixels; the server lane analyses PNG images like it of up "
        "to 38 megapixels. Scale it down, or save it as JPEG."
    )
    assert decodes == []


# The seven passes of Adam7: (first column, first row, column step, row step).
ADAM7 = [
    (0, 0, 8, 8),
    (4, 0, 8, 8),
    (0, 4, 4, 8),
    (2, 0, 4, 4),
    (0, 2, 2, 4),
    (1, 0, 2, 2),
    (0, 1, 1, 2),
]


def one_bit_png(size: tuple[int, int], *, interlaced: bool) -> bytes:
    """A blank one-bit greyscale PNG, interlaced (Adam7) or not: Pillow writes only plain ones."""
    width, height = size
    raw = bytearray()
    for left, top, step_x, step_y in ADAM7 if interlaced else [(0, 0, 1, 1)]:
        columns, rows = len(range(left, width, step_x)), len(range(top, height, step_y))
        if columns and rows:
            raw += (b"\0" + bytes(-(-columns // 8))) * rows  # filter byte, then packed bits
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, int(interlaced))
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + png_chunk(b"IEND", b"")
    )


def test_an_interlaced_png_is_decoded_like_a_plain_one():
    plain = analysis.analyse(one_bit_png((64, 48), interlaced=False))
    interlaced = analysis.analyse(one_bit_png((64, 48), interlaced=True))
    assert interlaced["swatches"] == plain["swatches"]
    assert (interlaced["sourceWidth"], interlaced["sourceHeight"]) == (64, 48)


def test_an_interlaced_png_is_refused_unread_at_a_size_a_plain_one_may_have(decodes):
    # 36 MP of one bit: plain, 36 × 5 + 8 = 188 ms, within; interlaced, 36 × 8 + 8 = 296.
    size = (6000, 6000)
    assert png_price(size=size, mode="1").milliseconds <= analysis.MAX_ANALYSIS_MS
    error = refused(with_png_size(one_bit_png((64, 48), interlaced=True), size))
    assert error.status == 413
    assert error.message == (
        "This PNG is interlaced and has 36 megapixels; the server lane analyses interlaced "
        "PNGs like it of up to 24 megapixels. Scale it down, or save it without interlacing."
    )
    assert decodes == []


def test_a_png_within_the_price_is_decoded(decodes):
    analysis.analyse(encoded(Image.new("1", (640, 480)), "PNG"))
    assert decodes and decodes[0][:2] == ("load", "PNG")


def test_a_webp_and_a_progressive_jpeg_over_the_price_are_refused_unread(decodes):
    # Lossy, 4000 × 3000: 152 ms, within; lossless: 248 ms, over.
    lossy = encoded(photo((40, 30)), "WEBP", quality=80)
    webp = refused(_vp8l_with_size((4000, 3000)))
    assert webp.status == 413
    assert "This WebP image has 12 megapixels" in webp.message
    assert "of up to 9 megapixels" in webp.message
    progressive = with_jpeg_size(encoded(photo((64, 48)), "JPEG", progressive=True), (6000, 4000))
    jpeg = refused(progressive)
    assert jpeg.status == 413
    assert jpeg.message.startswith("This JPEG has 24 megapixels in several scans")
    assert "save it as a baseline JPEG" in jpeg.message
    assert decodes == []
    analysis.analyse(lossy)
    assert decodes == [("libwebp", "WEBP", (40, 30))]


# --- Decode slots -------------------------------------------------------------------------


@pytest.fixture
def one_slot(monkeypatch) -> threading.BoundedSemaphore:
    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(analysis, "_decode_slots", slots)
    monkeypatch.setattr(analysis, "DECODE_WAIT", timedelta(0))
    return slots


def test_when_every_decode_slot_is_taken_the_upload_is_told_when_to_retry(one_slot):
    one_slot.acquire()
    error = refused(encoded(photo((64, 48)), "PNG"))
    assert (error.status, error.retry_after_seconds) == (429, 5)
    assert error.message == "The server is busy decoding other images; try again in 5 s."


def test_a_file_refused_before_decoding_does_not_wait_for_a_slot(one_slot):
    one_slot.acquire()
    assert refused(_vp8l_with_size((8000, 6200))).status == 413


class RecordingSlots:
    """Slots that are never free, and remember being asked."""

    def __init__(self):
        self.asked = 0

    def acquire(self, timeout=None):
        self.asked += 1
        return False


def test_once_one_upload_decodes_and_one_waits_the_next_is_refused_without_waiting(monkeypatch):
    slots = RecordingSlots()
    turns = threading.BoundedSemaphore(analysis.DECODE_SLOTS + analysis.DECODE_QUEUE)
    monkeypatch.setattr(analysis, "_decode_slots", slots)
    monkeypatch.setattr(analysis, "_decode_turns", turns)
    for _ in range(analysis.DECODE_SLOTS + analysis.DECODE_QUEUE):
        turns.acquire()
    error = refused(encoded(photo((64, 48)), "PNG"))
    assert (error.status, error.retry_after_seconds) == (429, 5)
    assert slots.asked == 0
    # A turn given back lets the next upload queue for a slot.
    turns.release()
    refused(encoded(photo((64, 48)), "PNG"))
    assert slots.asked == 1


def test_a_process_decodes_one_upload_at_a_time():
    assert (analysis.DECODE_SLOTS, analysis.DECODE_QUEUE) == (1, 1)
    assert analysis._decode_slots.acquire(blocking=False)
    try:
        assert not analysis._decode_slots.acquire(blocking=False)
    finally:
        analysis._decode_slots.release()


def test_a_failed_decode_gives_its_slot_back(one_slot):
    whole = encoded(photo((64, 48)), "PNG")
    assert refused(whole[: len(whole) // 2]).status == 400
    assert analysis.analyse(whole)["swatches"]


# --- Through the endpoint -----------------------------------------------------------------


def post(client, data: bytes, *, address: str = "127.0.0.1", prefix: str = ""):
    upload = SimpleUploadedFile("upload", data, content_type="application/octet-stream")
    return client.post(prefix + URL, {"image": upload}, REMOTE_ADDR=address)


@pytest.mark.django_db
def test_the_endpoint_answers_a_busy_process_with_429_and_a_message(client, one_slot):
    one_slot.acquire()
    response = post(client, encoded(photo((64, 48)), "PNG"))
    assert response.status_code == 429
    assert response["Retry-After"] == "5"
    assert "busy decoding other images" in response.json()["error"]


class Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def request_log():
    """What django.request logs, at any level, whatever handlers the settings give it."""
    logger = logging.getLogger("django.request")
    handler = Recorded()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.django_db
def test_a_busy_refusal_is_logged_as_one_warning_and_no_error(client, one_slot, request_log):
    one_slot.acquire()
    assert post(client, encoded(photo((64, 48)), "PNG")).status_code == 429
    logged = [(r.levelname, r.getMessage()) for r in request_log.records]
    assert logged == [("WARNING", "Too Many Requests: /showcases/workers/analyse/")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("prefix", "empty", "missing"),
    [
        (
            "",
            "The file you sent is empty (0 bytes): there is no image in it.",
            "Choose an image first.",
        ),
        (
            "/ru",
            "Присланный файл пуст (0 байт): изображения в нём нет.",
            "Сначала выберите изображение.",
        ),
        (
            "/de",
            "Die gesendete Datei ist leer (0 Byte): Sie enthält kein Bild.",
            "Wählen Sie zuerst ein Bild.",
        ),
    ],
    ids=["en", "ru", "de"],
)
def test_an_empty_upload_is_told_apart_from_no_upload(client, prefix, empty, missing):
    # Django's multipart parser keeps a 0-byte part that has a file name: it arrives.
    response = post(client, b"", prefix=prefix)
    assert (response.status_code, response.json()) == (400, {"error": empty})
    response = client.post(prefix + URL)
    assert (response.status_code, response.json()) == (400, {"error": missing})


@pytest.mark.django_db
def test_a_decoders_words_stay_out_of_a_translated_refusal(client):
    whole = encoded(photo((64, 48)), "PNG")
    response = post(client, whole[: len(whole) // 2], prefix="/ru")
    assert response.status_code == 400
    body = response.json()
    assert (
        body["error"]
        == "Не удалось декодировать изображение: возможно, файл повреждён или обрезан."
    )
    assert body["detail"].isascii() and body["detail"]


@pytest.mark.django_db
def test_only_a_processs_first_analysis_says_it_was_the_first(client, monkeypatch):
    monkeypatch.setattr(analysis, "_analyses", itertools.count())
    data = encoded(photo((64, 48)), "PNG")
    firsts = [post(client, data).json()["firstInProcess"] for _ in range(3)]
    assert firsts == [True, False, False]


# --- The CPU budgets ----------------------------------------------------------------------


def small_png() -> bytes:
    return encoded(photo((64, 48)), "PNG")  # RGB: 3,072 px × 15 ns + 8 ms → 9 ms


def charged(key: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT hits FROM v10r_rate_limit_windows WHERE key = %s", [key])
        row = cursor.fetchone()
    return row[0] if row else 0


def restart_windows() -> None:
    """Move every window back past its end, by the database's clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE v10r_rate_limit_windows SET window_start = now() - interval '61 seconds'"
        )


@pytest.mark.django_db
def test_a_clients_cpu_budget_refuses_with_retry_after_once_spent_and_recovers(client, monkeypatch):
    monkeypatch.setattr(analysis, "CLIENT_BUDGET_MS", 2 * 9)
    data = small_png()
    assert [post(client, data).status_code for _ in range(2)] == [200, 200]
    assert charged("analyse-cpu:127.0.0.1") == 18
    spent = post(client, data)
    assert spent.status_code == 429
    assert spent["Retry-After"] == "60"  # now() is fixed inside the test transaction
    assert spent.json() == {
        "error": "Your images have used the server lane's time for this minute (18 ms of "
        "processor time); try again in 60 s."
    }
    # The refused upload was not charged, to the client or to the site.
    assert (charged("analyse-cpu:127.0.0.1"), charged("analyse-cpu")) == (18, 18)
    assert post(client, data, address="127.0.0.2").status_code == 200
    restart_windows()
    assert post(client, data).status_code == 200


@pytest.mark.django_db
def test_the_sites_cpu_budget_refuses_every_client_once_spent_and_recovers(client, monkeypatch):
    monkeypatch.setattr(analysis, "SITE_BUDGET_MS", 2 * 9)
    data = small_png()
    assert post(client, data, address="192.0.2.1").status_code == 200
    assert post(client, data, address="192.0.2.2").status_code == 200
    spent = post(client, data, address="192.0.2.3")
    assert spent.status_code == 429
    assert spent["Retry-After"] == "10"
    assert spent.json()["error"] == (
        "The server lane is busy with other visitors' images; try again in 10 s."
    )
    # Neither budget keeps the charge for the work that was refused.
    assert (charged("analyse-cpu:192.0.2.3"), charged("analyse-cpu")) == (0, 18)
    restart_windows()
    assert post(client, data, address="192.0.2.3").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("cpu_seconds", "charged_ms"),
    [
        ((10.0, 10.5), 500),  # decoding took 500 ms of CPU: 9 charged first, 491 after
        ((10.0, 10.001), 9),  # took 1 ms: the price stands
    ],
    ids=["over its price", "under it"],
)
def test_a_decode_that_takes_longer_than_its_price_is_charged_what_it_took(
    client, monkeypatch, cpu_seconds, charged_ms
):
    clock = iter(cpu_seconds)
    monkeypatch.setattr(analysis, "_cpu_clock", lambda: next(clock))
    assert post(client, small_png()).status_code == 200
    assert (charged("analyse-cpu:127.0.0.1"), charged("analyse-cpu")) == (charged_ms, charged_ms)


@pytest.mark.django_db
def test_an_upload_refused_over_its_price_is_charged_nothing(client):
    response = post(client, one_bit_bomb())
    assert response.status_code == 413
    assert "38 megapixels" in response.json()["error"]
    assert (charged("analyse-cpu:127.0.0.1"), charged("analyse-cpu")) == (0, 0)


@pytest.mark.django_db
def test_an_upload_a_busy_process_refuses_is_charged_nothing(client, one_slot):
    one_slot.acquire()
    assert post(client, small_png()).status_code == 429
    assert (charged("analyse-cpu:127.0.0.1"), charged("analyse-cpu")) == (0, 0)


# How each refusal comes about: what to post, once the state that refuses it is set up.
def _over_the_memory_budget(client, one_slot, monkeypatch) -> bytes:
    return _vp8l_with_size((8000, 6200))


def _too_many_parts(client, one_slot, monkeypatch) -> bytes:
    return b"\xff\xd8" + b"\xff\xfe\x00\x02" * 2000 + b"\xff\xd9"


def _over_its_price(client, one_slot, monkeypatch) -> bytes:
    return one_bit_bomb()


def _interlaced_over_its_price(client, one_slot, monkeypatch) -> bytes:
    return with_png_size(one_bit_png((64, 48), interlaced=True), (6000, 6000))


def _every_slot_taken(client, one_slot, monkeypatch) -> bytes:
    one_slot.acquire()
    return small_png()


def _the_clients_budget_spent(client, one_slot, monkeypatch) -> bytes:
    monkeypatch.setattr(analysis, "CLIENT_BUDGET_MS", 9)
    assert post(client, small_png()).status_code == 200
    return small_png()


REFUSALS = [
    (_over_the_memory_budget, 413, "/ru", "Для декодирования этого изображения нужно 426 МБ"),
    (_over_the_memory_budget, 413, "/de", "Zum Dekodieren dieses Bildes wären 426 MB"),
    (_too_many_parts, 413, "/ru", "слишком много частей"),
    (_too_many_parts, 413, "/de", "zu vielen Teilen"),
    (_over_its_price, 413, "/ru", "В этом изображении PNG 50 Мп"),
    (_over_its_price, 413, "/de", "Dieses PNG-Bild hat 50 Megapixel"),
    (_interlaced_over_its_price, 413, "/ru", "Это чересстрочный PNG на 36 Мп"),
    (_interlaced_over_its_price, 413, "/de", "Dieses PNG ist interlaced und hat 36 Megapixel"),
    (
        _every_slot_taken,
        429,
        "/ru",
        "Сервер занят декодированием других изображений; попробуйте снова через 5 с.",
    ),
    (
        _every_slot_taken,
        429,
        "/de",
        "Der Server dekodiert gerade andere Bilder; versuchen Sie es in 5 s erneut.",
    ),
    (
        _the_clients_budget_spent,
        429,
        "/ru",
        "Ваши изображения исчерпали время серверной дорожки на эту минуту",
    ),
    (
        _the_clients_budget_spent,
        429,
        "/de",
        "Ihre Bilder haben die Zeit der Server-Bahn für diese Minute aufgebraucht",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("refusal", "status", "prefix", "message"),
    REFUSALS,
    ids=[f"{prefix[1:]} {refusal.__name__[1:]}" for refusal, _, prefix, _ in REFUSALS],
)
def test_every_refusal_is_translated(
    client, one_slot, monkeypatch, refusal, status, prefix, message
):
    data = refusal(client, one_slot, monkeypatch)
    response = post(client, data, prefix=prefix)
    assert response.status_code == status
    assert message in response.json()["error"]


@pytest.mark.django_db
@pytest.mark.parametrize("limit", ["ANALYSE_LIMIT", "CLIENT_BUDGET_MS"])
def test_the_server_lanes_limits_count_an_ipv6_client_per_64(client, monkeypatch, limit):
    from showcases import views

    # Room for one upload, by count or by price.
    if limit == "ANALYSE_LIMIT":
        monkeypatch.setattr(views, "ANALYSE_LIMIT", 1)
    else:
        monkeypatch.setattr(analysis, "CLIENT_BUDGET_MS", 9)
    data = small_png()
    assert post(client, data, address="2001:db8:1:2::1").status_code == 200
    # Another address in the same /64 (another device on the line, or the same host's next
    # temporary address) shares the budget...
    assert post(client, data, address="2001:db8:1:2:ffff:ffff:ffff:ffff").status_code == 429
    # ...and the next /64 has its own.
    assert post(client, data, address="2001:db8:1:3::1").status_code == 200


# --- Fuzzing the endpoint -----------------------------------------------------------------


def _seeds() -> dict[str, list[bytes]]:
    """Small valid files of every accepted format, in the variants decoders treat apart."""
    picture = photo((64, 48))
    with_alpha = picture.copy()
    with_alpha.putalpha(picture.convert("L"))
    wide = photo((1500, 40), seed=3)  # shrunk, and drafted as a JPEG
    paletted = picture.quantize(32)
    paletted.info["transparency"] = 3
    second = photo((64, 48), seed=4)
    return {
        "PNG": [
            encoded(picture, "PNG"),
            encoded(with_alpha, "PNG"),
            encoded(paletted, "PNG"),
            encoded(picture.convert("L"), "PNG"),
            encoded(picture.convert("1"), "PNG"),
            encoded(picture.convert("L").convert("I;16"), "PNG"),
            encoded(picture.convert("LA"), "PNG"),
            encoded(wide, "PNG"),
            encoded(picture, "PNG", save_all=True, append_images=[second]),
        ],
        "JPEG": [
            encoded(picture, "JPEG"),
            encoded(picture, "JPEG", progressive=True),
            encoded(picture.convert("L"), "JPEG"),
            encoded(picture.convert("CMYK"), "JPEG"),
            encoded(wide, "JPEG", quality=60),
            encoded(wide, "JPEG", progressive=True),
        ],
        "MPO": [
            encoded(picture, "MPO", save_all=True, append_images=[second]),
            encoded(wide, "MPO", save_all=True, append_images=[picture]),
        ],
        "WEBP": [
            encoded(picture, "WEBP"),
            encoded(picture, "WEBP", lossless=True),
            encoded(with_alpha, "WEBP"),
            encoded(with_alpha, "WEBP", lossless=True),
            encoded(wide, "WEBP"),
            encoded(picture, "WEBP", save_all=True, append_images=[second], duration=40),
        ],
    }


_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")


def _parts(fmt: str, data: bytes) -> tuple[bytes, list[bytes]]:
    """Split a file into its head and its chunks (PNG, RIFF) or marker segments (JPEG)."""
    if fmt in {"JPEG", "MPO"}:
        cuts = [m.start() for m in _MARKER.finditer(data, 2)] + [len(data)]
        return data[:2], [data[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    head, step, unpack = (8, 12, ">I") if fmt == "PNG" else (12, 8, "<I")
    parts, position = [], head
    while position + 8 <= len(data):
        (length,) = struct.unpack_from(unpack, data, position + (0 if fmt == "PNG" else 4))
        end = position + step + length + (length & 1 if fmt == "WEBP" else 0)
        parts.append(data[position:end])
        position = end
    return data[:head], parts


def _joined(fmt: str, head: bytes, parts: list[bytes], rng: random.Random) -> bytes:
    body = b"".join(parts)
    if fmt == "WEBP" and rng.random() < 0.8:
        head = head[:4] + struct.pack("<I", len(body) + 4) + head[8:]  # a RIFF size that fits
    return head + body


def _truncated(rng, fmt, data, pool):
    return data[: rng.randrange(len(data))]


def _bit_flipped(rng, fmt, data, pool):
    flipped = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
    return bytes(flipped)


def _overwritten(rng, fmt, data, pool):
    start, length = rng.randrange(len(data)), rng.randint(1, 16)
    filler = bytes(rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(length))
    return data[:start] + filler + data[start + length :]


def _chunk_spliced(rng, fmt, data, pool):
    head, parts = _parts(fmt, data)
    donors = _parts(fmt, rng.choice(pool[fmt]))[1] or [b""]
    for _ in range(rng.randint(1, 3)):
        if not parts:
            break
        i, j = rng.randrange(len(parts)), rng.randrange(len(parts))
        operation = rng.randrange(4)
        if operation == 0:
            del parts[i]
        elif operation == 1:
            parts.insert(i, parts[i])
        elif operation == 2:
            parts[i], parts[j] = parts[j], parts[i]
        else:
            parts.insert(i, rng.choice(donors))
    return _joined(fmt, head, parts, rng)


def _header_mutated(rng, fmt, data, pool):
    # Flip bits inside one of the first parts and repair the PNG CRC, so the decoders believe
    # the header and go deeper than a checksum error.
    head, parts = _parts(fmt, data)
    if not parts:
        return _bit_flipped(rng, fmt, data, pool)
    i = rng.randrange(min(len(parts), 4))
    part = bytearray(parts[i])
    for _ in range(rng.randint(1, 4)):
        part[rng.randrange(len(part))] ^= 1 << rng.randrange(8)
    if fmt == "PNG" and len(part) >= 12:
        part[-4:] = struct.pack(">I", zlib.crc32(bytes(part[4:-4])))
    parts[i] = bytes(part)
    return _joined(fmt, head, parts, rng)


def _polyglot(rng, fmt, data, pool):
    other = rng.choice([seed for seeds in pool.values() for seed in seeds])
    kind = rng.randrange(5)
    if kind == 0:
        return data + other
    if kind == 1:
        return other[:16] + data[16:]
    if kind == 2:
        return data[: len(data) // 2] + other[len(other) // 2 :]
    if kind == 3:
        return data[:20] + other
    return data + b"PK\x03\x04" + rng.randbytes(64)  # a zip appended, as in a GIFAR


MUTATIONS = [_truncated, _bit_flipped, _overwritten, _chunk_spliced, _header_mutated, _polyglot]
FUZZ_CASES = 3000


def _wrong_answer(response) -> str | None:
    """Return what is wrong with the endpoint's answer, or None."""
    status = response.status_code
    if status != 200 and not 400 <= status < 500:
        return f"status {status}"
    if response.get("Content-Type") != "application/json":
        return f"status {status}, {response.get('Content-Type')}"
    body = response.json()
    if status == 200:
        return None if isinstance(body.get("swatches"), list) else f"200 without swatches: {body}"
    error = body.get("error")
    return None if isinstance(error, str) and error else f"{status} without an error: {body}"


@pytest.mark.django_db
# Pillow warns about the broken files it still reads (corrupt EXIF, a malformed MPO index).
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_thousands_of_broken_files_of_every_format_never_get_a_500(client, monkeypatch):
    # Every case must reach the decoders, not the site's CPU budget.
    monkeypatch.setattr(analysis, "SITE_BUDGET_MS", 10**9)
    seeds = _seeds()
    formats = sorted(seeds)
    rng = random.Random(20261201)
    wrong, statuses = [], {fmt: set() for fmt in formats}
    for i in range(FUZZ_CASES):
        fmt = formats[i % len(formats)]
        mutation = MUTATIONS[i // len(formats) % len(MUTATIONS)]
        data = mutation(rng, fmt, rng.choice(seeds[fmt]), seeds)
        case = f"#{i} {fmt} {mutation.__name__} ({len(data)} bytes)"
        address = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"  # under the rate limit
        try:
            response = post(client, data, address=address)
        except Exception as exc:  # the test client re-raises what the view raised
            wrong.append(f"{case}: raised {exc!r}")
            continue
        statuses[fmt].add(response.status_code)
        if problem := _wrong_answer(response):
            wrong.append(f"{case}: {problem}")
    assert wrong == []
    # The fuzzing reached both sides: files that still decode and files that are refused.
    for fmt in formats:
        assert 200 in statuses[fmt], fmt
        assert 400 in statuses[fmt], fmt
