"""The server lane: decode an upload with Pillow, shrink it like the browser does, palette it.

An upload's cost is in its decoding, and a few kilobytes can claim fifty megapixels, so each
file is priced before a pixel of it is decoded: first a walk over its chunks or markers (cheap,
and what Pillow would walk in Python), then the bytes its decoder will hold (pixels × bytes per
pixel in Pillow's memory, plus what that decoder keeps beside them). Over the budget is a 413.
Whatever a decoder raises on a broken file is a 4xx, never a 500.

Memory is not time: a 6 KB PNG of 50 one-bit megapixels fits the memory budget and costs more
CPU than a 12 MP photo. So each upload is also priced in CPU milliseconds before it is decoded,
from its format and the pixels it declares (for a JPEG, also the pixels its reduced-size decode
expands); over MAX_ANALYSIS_MS is a 413 saying how large an image of that kind may be. The price
is then charged, in PostgreSQL, against the client's budget and the whole site's (a 429 with
Retry-After once spent), and a process decodes one upload at a time with at most one waiting:
analyses cannot take the threads or the CPU the pages need.
"""

from __future__ import annotations

import ctypes
import io
import itertools
import logging
import math
import re
import struct
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta

import numpy as np
from django.utils.translation import gettext as _
from PIL import Image, PngImagePlugin, UnidentifiedImageError

from core import ratelimit
from showcases import palette

logger = logging.getLogger(__name__)

MAX_EDGE = 720
MAX_BYTES = 20 * 1024 * 1024
# Pillow's decompression-bomb guard: an image claiming more pixels than this is refused
# before it is decoded (a 12 MP phone photo is well inside; a 1 GB bitmap is not).
MAX_PIXELS = 50_000_000
# MPO (the multi-picture JPEG phones write) opens through the JPEG plugin.
FORMATS = {"PNG", "JPEG", "WEBP"}

# What one decode may hold at once. With the upload itself (up to MAX_BYTES) and the
# interpreter's share, an upload grows the process by at most ~150 MB (bench/upload_memory.py).
# The dearest 12.5 MP phone photo, a lossless WebP, needs 108 MB; an RGB PNG may have 25 MP.
MAX_DECODE_BYTES = 112 * 2**20
# Decodes at once in one process, each up to MAX_DECODE_BYTES, and uploads that may wait for
# one. gunicorn runs a process per core with four threads: one decoding and one waiting leave
# the process's core half free and two threads for pages. (With two slots and any number
# waiting, six clients held every thread of both processes and pages queued behind them.)
DECODE_SLOTS = 1
DECODE_QUEUE = 1
DECODE_WAIT = timedelta(seconds=2)
RETRY_AFTER = timedelta(seconds=5)

# The price in CPU time: analyse()'s thread CPU time from bytes to palette, per pixel, measured
# with time.thread_time() on this project's 2-core machine, on photos and flat images of 1.4 to
# 50 MP in each format; rounded up. A faster machine takes less; the budgets are in these units.
# Whatever the size: Pillow's set-up and the palette of the 720 px result.
FIXED_MS = 8
# A PNG is inflated, unfiltered and shrunk whole: its cost follows its declared pixels, by
# mode (measured 4.2 ns a pixel for a 1-bit 50 MP image, 7 for L, 14 for RGB, 17 for RGBA).
PNG_NS_PER_PIXEL = {"1": 5, "L": 8, "P": 8, "I;16": 12, "LA": 12, "PA": 12, "RGB": 15}
PNG_WIDEST_NS = 18  # RGBA and every other mode
# An interlaced (Adam7) PNG is inflated and unfiltered in seven passes whose pixels are then
# scattered into place: measured with time.thread_time() around analyse(), the same pixels
# written once plain and once interlaced (filter none, zlib level 9): +2.6 ns a pixel for a
# 1-bit 24 MP image (5.9 → 8.5, ×1.44), +2.4 to 2.7 for 3 MP L, RGB and RGBA photos (×1.1 to
# ×1.2) and +2.3 for a flat 12 MP RGB one: the same few nanoseconds whatever the mode, so a
# surcharge per pixel rather than a factor, rounded up.
PNG_INTERLACED_NS_PER_PIXEL = 3
# libjpeg entropy-decodes every block whatever the draft scale (2.7 ns a pixel); a progressive
# or multi-scan JPEG goes through its whole-image coefficient buffer (6 to 9). The pixels it
# expands, at the reduced size, cost like any decoded pixel (13 with the shrinking).
JPEG_NS_PER_PIXEL = 3
JPEG_MULTI_SCAN_NS_PER_PIXEL = 10
DECODED_NS_PER_PIXEL = 13
# libwebp: lossy 5 to 12 ns a pixel by bitrate; its lossless decoder (a lossless WebP, a lossy
# one's alpha, every WebP through Pillow's animation decoder) 17 to 20.
WEBP_NS_PER_PIXEL = 12
WEBP_ARGB_NS_PER_PIXEL = 20
# One analysis may cost this much: every JPEG a 50 MP camera writes, a 12 MP photo as lossy
# WebP or RGB PNG; not a 50 MP one-bit PNG (258 ms).
MAX_ANALYSIS_MS = 200
# What one client (an IPv4 address or an IPv6 /64) may spend on analyses, and all of them
# together: six clients at their budget take a fifth of a core; the site's budget caps the
# analyses of any number of them at 0.3 of one, whichever process or machine they reach.
CLIENT_BUDGET_MS = 2_000
CLIENT_BUDGET_WINDOW = timedelta(minutes=1)
SITE_BUDGET_MS = 3_000
SITE_BUDGET_WINDOW = timedelta(seconds=10)
SITE_BUDGET_KEY = "analyse-cpu"

# Pillow walks PNG chunks, and JPEG markers up to the first scan, in Python: 1 to 8 µs each,
# so a 20 MB PNG of one-byte chunks costs 2 to 5 s. Encoders write IDAT in 8 to 64 KB chunks:
# a file may have a few hundred parts, then one per 2 KB (20 MB: 10,500, measured at 50 to
# 120 ms of Pillow's time when all of them are the dearest kind, unknown ancillary chunks).
MAX_PARTS = 256
BYTES_PER_PART = 2048
# libjpeg visits every block of the image once per scan, even an empty scan (about 1 ms at
# 12 MP). Progressive encoders write about ten scans; 64 leaves room for hand-tuned ones.
MAX_JPEG_SCANS = 64

# Bytes per pixel in Pillow's memory, not in the file: "1" takes a byte, RGB four.
BYTES_PER_PIXEL = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2}
WIDEST_PIXEL = 4  # every other mode

# Pillow's resize(BILINEAR, reducing_gap=2.0), which the server lane has always used, first
# reduces by whole factors; shrink() does that reduction a band of rows at a time.
REDUCING_GAP = 2.0
BAND_PIXELS = 1 << 19

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_JPEG_SIGNATURE = b"\xff\xd8\xff"
_PNG_COMPRESSED = {b"zTXt", b"iTXt", b"iCCP"}
# Deflate expands at most about 1032 times.
_DEFLATE_RATIO = 1032
# Python may hold a decoded text as four bytes a character.
_BYTES_PER_CHARACTER = 4
_SOF_MARKERS = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_PROGRESSIVE_SOF = {0xC2, 0xC6, 0xCA, 0xCE}
_STANDALONE_MARKERS = {0x00, 0x01, *range(0xD0, 0xD9)}
# In entropy-coded data 0xFF is followed by 0x00 (stuffing) or a restart marker; anything
# else is the next marker.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")

# What Pillow raises on a file that is merely broken: a 400 with its words, nothing logged.
_BROKEN_FILE = (
    OSError,
    ValueError,
    SyntaxError,
    EOFError,
    struct.error,
    IndexError,
    KeyError,
    ZeroDivisionError,
    OverflowError,
)


@dataclass
class UploadError(Exception):
    status: int
    message: str  # in the request's language
    # For a 429: when to try again (the view sends it as Retry-After).
    retry_after_seconds: int | None = None
    # A decoder's own words (English, whatever the language), kept out of the message.
    detail: str = ""


@dataclass(frozen=True)
class DecodeCost:
    """The bytes one decode holds: the decoded image, what its decoder keeps beside it until
    the image is closed, and what the decoder needs only while it runs."""

    native: int
    kept: int = 0
    transient: int = 0


@dataclass(frozen=True)
class Price:
    """What analysing an upload is estimated to cost, in CPU milliseconds, before it is done."""

    kind: str  # the format, as a visitor knows it: "PNG", "JPEG" or "WebP"
    size: tuple[int, int]  # the pixels the file declares
    ns_per_pixel: int  # for each of them
    decoded_ns: int = 0  # for a JPEG: the pixels it expands at the reduced size
    interlaced: bool = False  # an Adam7 PNG, dearer per pixel

    @property
    def milliseconds(self) -> int:
        # In whole nanoseconds, so a price that comes out even is not rounded up by a float.
        pixels = self.size[0] * self.size[1]
        total = FIXED_MS * 1_000_000 + self.decoded_ns + pixels * self.ns_per_pixel
        return -(-total // 1_000_000)

    def largest_megapixels(self) -> int:
        """The most megapixels an image of this kind may have within MAX_ANALYSIS_MS."""
        spare = (MAX_ANALYSIS_MS - FIXED_MS) * 1_000_000 - self.decoded_ns
        return max(0, spare // (self.ns_per_pixel * 1_000_000))


def png_price(*, size: tuple[int, int], mode: str, interlaced: bool = False) -> Price:
    rate = PNG_NS_PER_PIXEL.get(mode, PNG_WIDEST_NS)
    if interlaced:
        rate += PNG_INTERLACED_NS_PER_PIXEL
    return Price("PNG", size, rate, interlaced=interlaced)


def jpeg_price(*, size: tuple[int, int], decoded: tuple[int, int], multi_scan: bool) -> Price:
    rate = JPEG_MULTI_SCAN_NS_PER_PIXEL if multi_scan else JPEG_NS_PER_PIXEL
    return Price("JPEG", size, rate, decoded[0] * decoded[1] * DECODED_NS_PER_PIXEL)


def webp_price(*, size: tuple[int, int], argb: bool) -> Price:
    return Price("WebP", size, WEBP_ARGB_NS_PER_PIXEL if argb else WEBP_NS_PER_PIXEL)


@dataclass(frozen=True)
class _Layout:
    """What a walk over a file's chunks or markers found."""

    parts: int = 0
    scans: int = 0
    text_bytes: int = 0
    coefficient_bytes: int = 0


@dataclass(frozen=True)
class _WebPFeatures:
    size: tuple[int, int]
    has_alpha: bool
    animated: bool
    lossless: bool


# Counts this process's analyses. palette.warm() has compiled the palette before the first
# request, yet the first analysis still runs slower (measured under gunicorn on the sample
# photo: about 55 ms, then 35 to 45 ms): the page says so rather than pass it off as the norm.
_analyses = itertools.count()


def analyse(data: bytes, *, client: str | None = None) -> dict:
    """Return the palette of an encoded image, with how long each step took on the server.

    With client (its rate-limit bucket), the upload's price is charged against that client's
    CPU budget and the site's before it is decoded; without, nothing is charged.
    """
    started = time.perf_counter()
    if not data:
        # Django's parser keeps a 0-byte upload that has a file name: say what it is.
        raise UploadError(400, _("The file you sent is empty (0 bytes): there is no image in it."))
    if len(data) > MAX_BYTES:
        raise UploadError(413, too_large())
    image, (width, height) = _decode(data, client=client)
    decoded = time.perf_counter()
    pixels = np.asarray(image)
    swatches = palette.dominant_colors(pixels)
    luminance = palette.average_luminance(pixels)
    finished = time.perf_counter()
    return {
        "width": image.width,
        "height": image.height,
        "sourceWidth": width,
        "sourceHeight": height,
        "swatches": swatches,
        "luminance": luminance,
        # The share the palette leaves out (alpha under palette.ALPHA_MIN), which the page says.
        "transparent": int(np.count_nonzero(pixels[..., 3] < palette.ALPHA_MIN))
        / pixels[..., 3].size,
        "decodeMs": (decoded - started) * 1000,
        "analysisMs": (finished - decoded) * 1000,
        # How many palette passes analysisMs covers: one, as in each browser lane
        # (image-analysis.js's PASSES), so the page's three "Analysis" times are of the same work.
        "passes": 1,
        "firstInProcess": next(_analyses) == 0,
    }


def too_large() -> str:
    """Say, in the request's language, that an upload is over MAX_BYTES."""
    return _("The image is larger than %(limit)d MB.") % {"limit": MAX_BYTES // 2**20}


def target_size(size: tuple[int, int]) -> tuple[int, int]:
    """Return the size the server lane analyses an image of this size at."""
    width, height = size
    scale = min(1.0, MAX_EDGE / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def native_bytes(*, size: tuple[int, int], mode: str) -> int:
    """Return the bytes Pillow holds for a decoded image of this size and mode."""
    return size[0] * size[1] * BYTES_PER_PIXEL.get(mode, WIDEST_PIXEL)


def shrink_bytes(*, size: tuple[int, int], target: tuple[int, int]) -> int:
    """Return the most shrink() holds beside the image it shrinks."""
    if size == target:
        return target[0] * target[1] * 4
    width, height = size
    factor_x, factor_y = _factors(size, target)
    reduced = -(-width // factor_x) * -(-height // factor_y) * 4
    # A band is cut out, converted to RGBA, then premultiplied: two copies at once at most.
    band = width * _band_rows(width, factor_y) * 2 * 4
    # The final resize's RGBa result and its RGBA conversion.
    final = target[0] * target[1] * 2 * 4
    return reduced + band + final


def peak_bytes(cost: DecodeCost, *, size: tuple[int, int], target: tuple[int, int]) -> int:
    """Return the most memory decoding an image of this (decoded) size and shrinking it hold."""
    return cost.native + cost.kept + max(cost.transient, shrink_bytes(size=size, target=target))


def shrink(image: Image.Image, target: tuple[int, int]) -> Image.Image:
    """Return image as RGBA at target size, the very pixels of
    image.convert("RGBA").resize(target, BILINEAR, reducing_gap=2.0) without a full-size copy.

    resize() premultiplies alpha (RGBa), reduces by whole factors, then resamples what is left.
    Each output pixel of the reduction depends only on its own factor × factor block, so bands
    whose height is a multiple of the factor reduce to the same rows as the whole image does.
    """
    if image.size == target:
        return image.convert("RGBA")
    width, height = image.size
    factor_x, factor_y = _factors(image.size, target)
    rows = _band_rows(width, factor_y)
    reduced = Image.new("RGBa", (-(-width // factor_x), -(-height // factor_y)))
    for top in range(0, height, rows):
        band = image.crop((0, top, width, min(height, top + rows))).convert("RGBA")
        band = band.convert("RGBa")
        if (factor_x, factor_y) != (1, 1):
            band = band.reduce((factor_x, factor_y))
        reduced.paste(band, (0, top // factor_y))
    box = (0, 0, width / factor_x, height / factor_y)
    return reduced.resize(target, Image.Resampling.BILINEAR, box=box).convert("RGBA")


def _factors(size: tuple[int, int], target: tuple[int, int]) -> tuple[int, int]:
    # Pillow's own arithmetic in Image.resize.
    return (
        int(size[0] / target[0] / REDUCING_GAP) or 1,
        int(size[1] / target[1] / REDUCING_GAP) or 1,
    )


def _band_rows(width: int, factor_y: int) -> int:
    return factor_y * max(1, BAND_PIXELS // (width * factor_y))


# --- Decoding -----------------------------------------------------------------------------


def _decode(data: bytes, *, client: str | None) -> tuple[Image.Image, tuple[int, int]]:
    """Return the upload decoded and shrunk to target_size, and the size its file declares."""
    layout = _walk(data)
    features = _webp_features(data)
    if features is not None and not features.animated:
        size = features.size
        _check_pixels(size)
        target = target_size(size)
        argb = features.lossless or features.has_alpha
        _check_budget(webp_cost(size=size, argb=argb), size=size, target=target)
        price = _check_price(webp_price(size=size, argb=argb))
        with _decode_turn(price, client=client), _decoding():
            return shrink(_decode_webp(data, size=size), target), size

    image = _open(data)
    try:
        size = image.size
        _check_pixels(size)
        target = target_size(size)
        if image.format in {"JPEG", "MPO"} and size != target:
            # Decode at 1/2, 1/4 or 1/8 size straight from the DCT when that still covers the
            # target: most of a 12 MP JPEG is never expanded to pixels.
            with _decoding():
                image.draft("RGB", target)
        _check_budget(_pillow_cost(image, layout), size=image.size, target=target)
        price = _check_price(_pillow_price(image, layout, size=size))
        with _decode_turn(price, client=client), _decoding():
            return shrink(image, target), size
    finally:
        image.close()


def _open(data: bytes) -> Image.Image:
    try:
        return Image.open(io.BytesIO(data), formats=sorted(FORMATS))
    except UnidentifiedImageError:
        kind = _signed_kind(data)
        if kind is None:
            raise UploadError(415, _("Only PNG, JPEG and WebP images can be analysed.")) from None
        # Pillow gives up on a header it cannot read (a 0 × 0 PNG, a bad bit depth, nothing
        # after the signature) as if the format were unknown; the signature says it is not.
        raise _undecodable(f"the {kind} file's header could not be read") from None
    except Exception as exc:
        raise _refusal(exc) from None


def _signed_kind(data: bytes) -> str | None:
    """The format an upload's first bytes claim, as a visitor knows it, or None."""
    if data.startswith(_PNG_SIGNATURE):
        return "PNG"
    if data.startswith(_JPEG_SIGNATURE):
        return "JPEG"
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "WebP"
    return None


def webp_cost(*, size: tuple[int, int], argb: bool) -> DecodeCost:
    """What libwebp holds decoding a still WebP into RGBA; argb when its lossless decoder runs
    (a lossless WebP, or a lossy one's alpha plane), which keeps a whole ARGB copy meanwhile."""
    pixels = size[0] * size[1]
    # Measured: 3.9 bytes a pixel lossy, 7.7 lossless, 8.7 lossy with alpha.
    return DecodeCost(native=4 * pixels, transient=5 * pixels if argb else 0)


def pillow_webp_cost(*, size: tuple[int, int]) -> DecodeCost:
    """What Pillow's WebP plugin holds: for an animated WebP, or with libwebp out of reach."""
    pixels = size[0] * size[1]
    # libwebp's animation decoder keeps two canvases and Pillow a bytes copy of the frame
    # beside the image (3 × 4 bytes a pixel), and lossless decoding needs 4 more while it
    # runs (measured: 16 to 18 bytes a pixel in all).
    return DecodeCost(native=4 * pixels, kept=12 * pixels, transient=4 * pixels)


def _pillow_cost(image: Image.Image, layout: _Layout) -> DecodeCost:
    if image.format == "WEBP":
        return pillow_webp_cost(size=image.size)
    # PNG text lives on in image.info; a multi-scan JPEG needs libjpeg's whole-image buffer.
    return DecodeCost(
        native=native_bytes(size=image.size, mode=image.mode),
        kept=layout.text_bytes,
        transient=layout.coefficient_bytes,
    )


def _pillow_price(image: Image.Image, layout: _Layout, *, size: tuple[int, int]) -> Price:
    if image.format == "WEBP":
        return webp_price(size=size, argb=True)  # Pillow's animation decoder
    if image.format == "PNG":
        return png_price(size=size, mode=image.mode, interlaced=bool(image.info.get("interlace")))
    # image.size is the draft's; a multi-scan JPEG is the one that needs the coefficients.
    return jpeg_price(size=size, decoded=image.size, multi_scan=layout.coefficient_bytes > 0)


def _check_price(price: Price) -> Price:
    if price.milliseconds <= MAX_ANALYSIS_MS:
        return price
    values = {
        "format": price.kind,
        "megapixels": math.ceil(price.size[0] * price.size[1] / 1_000_000),
        "limit": price.largest_megapixels(),
    }
    if price.kind == "JPEG":
        # Under MAX_PIXELS only a JPEG in several scans can cost this much.
        message = _(
            "This JPEG has %(megapixels)d megapixels in several scans (a progressive JPEG); "
            "the server lane analyses such JPEGs of up to %(limit)d megapixels. Scale it "
            "down, or save it as a baseline JPEG."
        )
    elif price.interlaced:
        message = _(
            "This PNG is interlaced and has %(megapixels)d megapixels; the server lane analyses "
            "interlaced PNGs like it of up to %(limit)d megapixels. Scale it down, or save it "
            "without interlacing."
        )
    else:
        message = _(
            "This %(format)s image has %(megapixels)d megapixels; the server lane analyses "
            "%(format)s images like it of up to %(limit)d megapixels. Scale it down, or save "
            "it as JPEG."
        )
    raise UploadError(413, message % values)


def _check_pixels(size: tuple[int, int]) -> None:
    # Pillow itself only warns between 89 and 179 MP, and changing its warning filters is not
    # safe with gunicorn's threads: this check is the guard.
    if size[0] * size[1] > MAX_PIXELS:
        raise _too_many_pixels()


def _check_budget(cost: DecodeCost, *, size: tuple[int, int], target: tuple[int, int]) -> None:
    needed = peak_bytes(cost, size=size, target=target)
    if needed > MAX_DECODE_BYTES:
        raise UploadError(
            413,
            _(
                "Decoding this image would take %(needed)d MB of memory, more than the "
                "%(limit)d MB the server allows. Try a smaller image."
            )
            % {"needed": math.ceil(needed / 2**20), "limit": MAX_DECODE_BYTES // 2**20},
        )


_decode_slots = threading.BoundedSemaphore(DECODE_SLOTS)
# Uploads decoding or waiting to: a waiter holds a gunicorn thread a page could have had.
_decode_turns = threading.BoundedSemaphore(DECODE_SLOTS + DECODE_QUEUE)


# The decoders run in the calling thread: its CPU time is the decode's.
_cpu_clock = time.thread_time


@contextmanager
def _decode_turn(price: Price, *, client: str | None):
    """Charge the price to the budgets, then hold one of the process's decode slots; a 429
    when the queue for them is full or none frees up in DECODE_WAIT, and then nothing is
    charged. A decode that takes longer than its price is charged the difference after."""
    charges = _charge(price, client=client)
    try:
        with _decode_slot():
            started = _cpu_clock()
            try:
                yield
            finally:
                spent = math.ceil((_cpu_clock() - started) * 1000)
                _charge_overrun(charges, overrun=spent - price.milliseconds)
    except _Busy:
        _refund(charges)
        raise


@contextmanager
def _decode_slot():
    if not _decode_turns.acquire(blocking=False):
        raise _busy()
    try:
        if not _decode_slots.acquire(timeout=DECODE_WAIT.total_seconds()):
            raise _busy()
        try:
            yield
        finally:
            _decode_slots.release()
    finally:
        _decode_turns.release()


class _Busy(UploadError):
    """Every decode slot of this process is taken: a 429, not a 503. Anyone can make the
    process this busy by posting images, so the answer says "slow down" as the budgets' do:
    a 503 would read as the site being down (and a proxy or client may retry it at once)."""


def _busy() -> UploadError:
    seconds = int(RETRY_AFTER.total_seconds())
    return _Busy(
        429,
        _("The server is busy decoding other images; try again in %(seconds)d s.")
        % {"seconds": seconds},
        retry_after_seconds=seconds,
    )


@dataclass(frozen=True)
class _Charge:
    key: str
    cost: int
    limit: int
    window: timedelta


def _charge(price: Price, *, client: str | None) -> list[_Charge]:
    """Charge the price to the client's budget, then the site's; return the charges, or a
    429 with Retry-After (and nothing charged) when either is spent."""
    if client is None:
        return []
    cost = price.milliseconds
    mine = _Charge(f"analyse-cpu:{client}", cost, CLIENT_BUDGET_MS, CLIENT_BUDGET_WINDOW)
    site = _Charge(SITE_BUDGET_KEY, cost, SITE_BUDGET_MS, SITE_BUDGET_WINDOW)
    verdict = _hit(mine)
    if not verdict.allowed:
        _refund([mine])
        raise UploadError(
            429,
            _(
                "Your images have used the server lane's time for this minute "
                "(%(budget)d ms of processor time); try again in %(seconds)d s."
            )
            % {"budget": CLIENT_BUDGET_MS, "seconds": verdict.retry_after_seconds},
            retry_after_seconds=verdict.retry_after_seconds,
        )
    verdict = _hit(site)
    if not verdict.allowed:
        _refund([mine, site])
        raise UploadError(
            429,
            _("The server lane is busy with other visitors' images; try again in %(seconds)d s.")
            % {"seconds": verdict.retry_after_seconds},
            retry_after_seconds=verdict.retry_after_seconds,
        )
    return [mine, site]


def _hit(charge: _Charge) -> ratelimit.Verdict:
    return ratelimit.hit(key=charge.key, limit=charge.limit, window=charge.window, cost=charge.cost)


def _refund(charges: list[_Charge]) -> None:
    # Work refused is not work done: a refusal leaves the budgets as they were.
    for charge in charges:
        ratelimit.forgive(key=charge.key, cost=charge.cost)


def _charge_overrun(charges: list[_Charge], *, overrun: int) -> None:
    # The price is an estimate; charging what a decode took beyond it keeps the budgets a
    # bound on the CPU the lane really used (give or take one upload's overrun), whatever
    # kind of file the rates misjudge.
    if overrun > 0:
        for charge in charges:
            _hit(replace(charge, cost=overrun))


@contextmanager
def _decoding():
    """Turn whatever a decoder raises on a hostile file into a refusal."""
    try:
        yield
    except UploadError:
        raise
    except Exception as exc:
        raise _refusal(exc) from None


def _refusal(exc: Exception) -> UploadError:
    if isinstance(exc, Image.DecompressionBombError):
        return _too_many_pixels()
    if not isinstance(exc, _BROKEN_FILE):
        # Still the file's doing (the code around it works on every valid image), but a
        # decoder bug worth reading about: the client gets its 400, the log the traceback.
        logger.error("Decoding an upload raised %r", exc, exc_info=exc)
    return _undecodable(str(exc) or type(exc).__name__)


def _undecodable(detail: str) -> UploadError:
    message = _("The image could not be decoded; the file may be damaged or cut short.")
    return UploadError(400, message, detail=detail)


def _too_many_pixels() -> UploadError:
    return UploadError(
        413,
        _(
            "The image has more than %(limit)d million pixels. Scale it down to %(limit)d "
            "megapixels or fewer and send it again."
        )
        % {"limit": MAX_PIXELS // 1_000_000},
    )


# --- Walking the file's structure ---------------------------------------------------------


def _walk(data: bytes) -> _Layout:
    """Return the file's layout; a 413 when it has absurdly many parts for its size."""
    limit = MAX_PARTS + len(data) // BYTES_PER_PART
    if data.startswith(_PNG_SIGNATURE):
        layout = _walk_png(data, limit=limit)
    elif data.startswith(_JPEG_SIGNATURE):
        layout = _walk_jpeg(data, limit=limit)
    else:
        return _Layout()
    if layout.parts > limit or layout.scans > MAX_JPEG_SCANS:
        raise UploadError(
            413,
            _(
                "The image file has too many parts for its size; save it again with an "
                "ordinary image editor."
            ),
        )
    return layout


def _walk_png(data: bytes, *, limit: int) -> _Layout:
    """Count the chunks Pillow reads, and the most their text can decompress to."""
    parts = text = 0
    seen_image = animated = False
    position = len(_PNG_SIGNATURE)
    while position + 8 <= len(data) and parts <= limit:
        length, kind = struct.unpack_from(">I4s", data, position)
        parts += 1
        if kind in _PNG_COMPRESSED:
            text += min(PngImagePlugin.MAX_TEXT_CHUNK, _DEFLATE_RATIO * length)
        elif kind == b"tEXt":
            text += length
        elif kind == b"acTL":
            animated = True
        elif kind == b"IDAT":
            seen_image = True
        elif kind == b"IEND" or (kind == b"fcTL" and animated and seen_image):
            # Pillow stops at the end, or at the second frame of an APNG.
            break
        position += 12 + length
    text = min(text, PngImagePlugin.MAX_TEXT_MEMORY) * _BYTES_PER_CHARACTER
    return _Layout(parts=parts, text_bytes=text)


def _walk_jpeg(data: bytes, *, limit: int) -> _Layout:
    """Count the markers, the junk bytes Pillow steps over before the first scan and the scans
    libjpeg decodes, up to the end of the primary image (an MPO's first frame)."""
    parts = scans = first_scan_components = 0
    frame: tuple[int, int, list[tuple[int, int]], bool] | None = None
    position = 2
    while position + 1 < len(data) and parts <= limit and scans <= MAX_JPEG_SCANS:
        if scans:
            # Past the first scan libjpeg reads on in C: only the markers matter now.
            found = _NEXT_MARKER.search(data, position)
            if found is None:
                break
            position = found.start()
        elif data[position] != 0xFF:
            # Pillow steps over junk before the first scan one byte at a time.
            following = data.find(b"\xff", position)
            if following < 0:
                break
            parts += following - position
            position = following
            continue
        marker = data[position + 1]
        if marker == 0xD9:
            break
        parts += 1
        if marker == 0xFF:
            position += 1
            continue
        if marker in _STANDALONE_MARKERS or position + 4 > len(data):
            position += 2
            continue
        (length,) = struct.unpack_from(">H", data, position + 2)
        body = data[position + 4 : position + 2 + length]
        if marker in _SOF_MARKERS and frame is None:
            frame = _frame(body, progressive=marker in _PROGRESSIVE_SOF)
        elif marker == 0xDA:
            if not scans and body:
                first_scan_components = body[0]
            scans += 1
        position += 2 + length
    coefficients = _coefficient_bytes(frame, first_scan_components) if frame else 0
    return _Layout(parts=parts, scans=scans, coefficient_bytes=coefficients)


def _frame(body: bytes, *, progressive: bool) -> tuple[int, int, list[tuple[int, int]], bool]:
    """Return width, height, each component's (h, v) sampling and progressive from a SOF."""
    if len(body) < 6:
        return 0, 0, [], progressive
    height, width, count = struct.unpack_from(">HHB", body, 1)
    sampling = [
        (body[6 + 3 * i + 1] >> 4, body[6 + 3 * i + 1] & 15)
        for i in range(count)
        if 6 + 3 * i + 2 < len(body)
    ]
    return width, height, sampling, progressive


def _coefficient_bytes(
    frame: tuple[int, int, list[tuple[int, int]], bool], first_scan_components: int
) -> int:
    """Return the bytes of libjpeg's whole-image coefficient buffer, which it allocates at
    full size (whatever the draft scale) for a progressive JPEG or one whose first scan
    leaves out a component; 0 for a single-scan JPEG."""
    width, height, sampling, progressive = frame
    if not sampling or not (progressive or first_scan_components < len(sampling)):
        return 0
    if not all(1 <= h <= 4 and 1 <= v <= 4 for h, v in sampling):
        return 0  # libjpeg refuses such a frame before it allocates anything
    h_max = max(h for h, _v in sampling)
    v_max = max(v for _h, v in sampling)
    total = 0
    for h, v in sampling:
        # jdcoefct.c: blocks in each direction, rounded up to whole MCUs; 64 shorts a block.
        wide = -(-width * h // (h_max * 8))
        high = -(-height * v // (v_max * 8))
        total += -(-wide // h) * h * -(-high // v) * v * 128
    return total


# --- WebP through libwebp -----------------------------------------------------------------


class _BitstreamFeatures(ctypes.Structure):
    # WebPBitstreamFeatures in libwebp's decode.h.
    _fields_ = [
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("has_alpha", ctypes.c_int),
        ("has_animation", ctypes.c_int),
        ("format", ctypes.c_int),
        ("pad", ctypes.c_uint32 * 5),
    ]


# WebPGetFeatures() is an inline wrapper passing WEBP_DECODER_ABI_VERSION; libwebp checks
# only its major byte, 2 since libwebp 0.5.
_DECODER_ABI = 0x0200
_LOSSLESS = 2


@dataclass(frozen=True)
class _LibWebP:
    get_features: ctypes._CFuncPtr
    decode_rgba_into: ctypes._CFuncPtr


def _load_libwebp() -> _LibWebP | None:
    """Return libwebp's still-image decoder from the copy Pillow's _webp module is linked
    against, or None.

    Pillow decodes every WebP through libwebp's animation decoder, which holds two canvases
    and hands over a bytes copy before Pillow makes its own: 16 bytes a pixel, 195 MB for a
    12 MP photo. WebPDecodeRGBAInto writes the pixels once, into memory we own.
    """
    try:
        from PIL import _webp

        # dlopen() of a loaded module returns its handle; dlsym() searches its dependencies.
        library = ctypes.CDLL(_webp.__file__)
        get_features = library.WebPGetFeaturesInternal
        decode_rgba_into = library.WebPDecodeRGBAInto
    except (ImportError, OSError, AttributeError):
        return None
    get_features.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.POINTER(_BitstreamFeatures),
        ctypes.c_int,
    ]
    get_features.restype = ctypes.c_int
    decode_rgba_into.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
    ]
    decode_rgba_into.restype = ctypes.c_void_p
    return _LibWebP(get_features=get_features, decode_rgba_into=decode_rgba_into)


_LIBWEBP = _load_libwebp()


def _webp_features(data: bytes) -> _WebPFeatures | None:
    """Return what libwebp reads from a WebP's headers; None when it is not a WebP Pillow
    would open, libwebp cannot read the headers, or libwebp is out of reach."""
    # The same test as Pillow's WebP plugin, so both accept the same files.
    if not (
        data.startswith(b"RIFF")
        and data[8:12] == b"WEBP"
        and data[12:16] in {b"VP8 ", b"VP8L", b"VP8X"}
    ):
        return None
    if _LIBWEBP is None:
        return None
    features = _BitstreamFeatures()
    if _LIBWEBP.get_features(data, len(data), ctypes.byref(features), _DECODER_ABI) != 0:
        return None
    return _WebPFeatures(
        size=(features.width, features.height),
        has_alpha=bool(features.has_alpha),
        animated=bool(features.has_animation),
        lossless=features.format == _LOSSLESS,
    )


def _decode_webp(data: bytes, *, size: tuple[int, int]) -> Image.Image:
    """Return a still WebP decoded by libwebp as RGBA, the pixels Pillow's plugin gives."""
    width, height = size
    pixels = np.empty((height, width, 4), dtype=np.uint8)
    if not _LIBWEBP.decode_rgba_into(data, len(data), pixels.ctypes.data, pixels.nbytes, width * 4):
        raise _undecodable("invalid WebP data")
    return Image.fromarray(pixels)
