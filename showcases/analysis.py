"""The server lane: decode an upload with Pillow, shrink it like the browser does, palette it."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from django.utils.translation import gettext as _
from PIL import Image, UnidentifiedImageError

from showcases import palette

MAX_EDGE = 720
MAX_BYTES = 20 * 1024 * 1024
# Pillow's decompression-bomb guard: an image claiming more pixels than this is refused
# before it is decoded (a 12 MP phone photo is well inside; a 1 GB bitmap is not).
MAX_PIXELS = 50_000_000
FORMATS = {"PNG", "JPEG", "WEBP"}


@dataclass
class UploadError(Exception):
    status: int
    message: str


def analyse(data: bytes) -> dict:
    """Return the palette of an encoded image, with how long each step took on the server."""
    started = time.perf_counter()
    if not data:
        raise UploadError(400, _("Choose an image first."))
    if len(data) > MAX_BYTES:
        raise UploadError(
            413, _("The image is larger than %(limit)d MB.") % {"limit": MAX_BYTES // 2**20}
        )
    image = _open(data)
    width, height = image.size
    scale = min(1.0, MAX_EDGE / max(width, height))
    target = (max(1, round(width * scale)), max(1, round(height * scale)))
    if image.format == "JPEG" and scale < 1:
        # Decode at 1/2, 1/4 or 1/8 size straight from the DCT when that still covers the
        # target: most of a 12 MP JPEG is never expanded to pixels.
        image.draft("RGB", target)
    try:
        image = image.convert("RGBA")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        message = _("The image could not be decoded: %(error)s") % {"error": exc}
        raise UploadError(400, message) from None
    if image.size != target:
        image = image.resize(target, Image.Resampling.BILINEAR, reducing_gap=2.0)
    decoded = time.perf_counter()
    pixels = np.asarray(image)
    swatches = palette.dominant_colors(pixels)
    luminance = palette.average_luminance(pixels)
    finished = time.perf_counter()
    return {
        "width": target[0],
        "height": target[1],
        "sourceWidth": width,
        "sourceHeight": height,
        "swatches": swatches,
        "luminance": luminance,
        "decodeMs": (decoded - started) * 1000,
        "analysisMs": (finished - decoded) * 1000,
    }


def _open(data: bytes) -> Image.Image:
    import io

    with warnings.catch_warnings():
        # Between MAX_PIXELS and twice that Pillow only warns; treat it as the error it is.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data), formats=sorted(FORMATS))
            if image.width * image.height > MAX_PIXELS:
                raise Image.DecompressionBombError("too many pixels")
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise UploadError(
                413,
                _("The image has more than %(limit)d million pixels.")
                % {"limit": MAX_PIXELS // 1_000_000},
            ) from None
        except UnidentifiedImageError:
            raise UploadError(415, _("Only PNG, JPEG and WebP images can be analysed.")) from None
    return image
