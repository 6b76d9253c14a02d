"""Dominant colours and mean luminance of straight RGBA8 pixels: the palette of docs/palette.md.

The server twin of static/showcases/palette.js. Both use integer arithmetic only, so on the same
bytes they return the same swatches, in the same order, with the same shares, bit for bit.

The two loops over pixels and buckets are compiled with Numba: one pass that reads each pixel
once and updates its bucket's four counters. Plain NumPy needs several passes over a 12 MP
image (key arithmetic, then weighted bincounts or a 16.7 M-bin colour histogram folded into
buckets) and measured 5–8× slower than a bare bincount of the keys; this loop is about 1.2×.
"""

from __future__ import annotations

import logging
from typing import TypedDict

import numpy as np
from numba import njit

logger = logging.getLogger(__name__)

ALPHA_MIN = 128
BUCKETS = 1 << 15
# Weighted squared distance (2·dr² + 4·dg² + 3·db²) under which two colours count as one.
MERGE_BELOW = 5184


class Swatch(TypedDict):
    hex: str
    r: int
    g: int
    b: int
    share: float


def _flat(pixels: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """Return the pixels as one contiguous uint8 array (without copying when possible)."""
    if isinstance(pixels, np.ndarray):
        if pixels.dtype != np.uint8:
            raise TypeError(f"pixels must be uint8, not {pixels.dtype}")
        return np.ascontiguousarray(pixels).reshape(-1)
    return np.frombuffer(pixels, dtype=np.uint8)


@njit(cache=True, nogil=True)
def _histogram(flat):  # pragma: no cover - compiled; exercised through dominant_colors
    """Per bucket: pixel count and exact sums of r, g and b, as int64 rows of four."""
    acc = np.zeros((BUCKETS, 4), dtype=np.int64)
    end = flat.size - flat.size % 4
    for i in range(0, end, 4):
        if flat[i + 3] < ALPHA_MIN:
            continue
        r = np.int64(flat[i])
        g = np.int64(flat[i + 1])
        b = np.int64(flat[i + 2])
        key = ((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3)
        acc[key, 0] += 1
        acc[key, 1] += r
        acc[key, 2] += g
        acc[key, 3] += b
    return acc


@njit(cache=True, nogil=True)
def _merge(keys, acc, count):  # pragma: no cover - compiled; exercised through dominant_colors
    """Walk the buckets in order; fold each into the first entry whose founding colour is
    near, else found a new entry while fewer than count exist, else drop it."""
    founder_keys = np.empty(count, dtype=np.int64)
    founders = np.empty((count, 3), dtype=np.int64)
    merged = np.zeros((count, 4), dtype=np.int64)
    made = 0
    for key in keys:
        n = acc[key, 0]
        # Round half up: floor((2·sum + count) / (2·count)).
        r = (2 * acc[key, 1] + n) // (2 * n)
        g = (2 * acc[key, 2] + n) // (2 * n)
        b = (2 * acc[key, 3] + n) // (2 * n)
        home = -1
        for j in range(made):
            dr = r - founders[j, 0]
            dg = g - founders[j, 1]
            db = b - founders[j, 2]
            if 2 * dr * dr + 4 * dg * dg + 3 * db * db < MERGE_BELOW:
                home = j
                break
        if home < 0 and made < count:
            home = made
            founder_keys[made] = key
            founders[made, 0] = r
            founders[made, 1] = g
            founders[made, 2] = b
            made += 1
        if home >= 0:
            for c in range(4):
                merged[home, c] += acc[key, c]
    return founder_keys[:made], merged[:made]


@njit(cache=True, nogil=True)
def _luminance_sums(flat):  # pragma: no cover - compiled; exercised through average_luminance
    end = flat.size - flat.size % 4
    weighted = np.int64(0)
    counted = np.int64(0)
    for i in range(0, end, 4):
        if flat[i + 3] < ALPHA_MIN:
            continue
        weighted += (
            2126 * np.int64(flat[i]) + 7152 * np.int64(flat[i + 1]) + 722 * np.int64(flat[i + 2])
        )
        counted += 1
    return weighted, counted


def dominant_colors(
    pixels: bytes | bytearray | memoryview | np.ndarray, count: int = 6
) -> list[Swatch]:
    """Return up to count swatches, most common first: [{hex, r, g, b, share}]."""
    acc = _histogram(_flat(pixels))
    counts = acc[:, 0]
    counted = int(counts.sum())
    if counted == 0 or count <= 0:
        return []
    keys = np.flatnonzero(counts)
    # Count descending, then key ascending: lexsort sorts by its last key first.
    keys = keys[np.lexsort((keys, -counts[keys]))]
    founder_keys, merged = _merge(keys, acc, count)

    order = sorted(range(len(founder_keys)), key=lambda i: (-merged[i, 0], founder_keys[i]))
    swatches: list[Swatch] = []
    for i in order:
        n, *sums = (int(v) for v in merged[i])
        r, g, b = ((2 * s + n) // (2 * n) for s in sums)
        swatches.append(
            {"hex": f"#{r:02x}{g:02x}{b:02x}", "r": r, "g": g, "b": b, "share": n / counted}
        )
    return swatches


def average_luminance(pixels: bytes | bytearray | memoryview | np.ndarray) -> float:
    """Return the mean gamma-encoded Rec. 709 luminance of the counting pixels, 0 to 1."""
    weighted, counted = _luminance_sums(_flat(pixels))
    # One division of exact integers, as in palette.js.
    return int(weighted) / (int(counted) * 2_550_000) if counted else 0.0


def warm() -> None:
    """Compile the loops, or load them from Numba's cache, for the arrays requests pass.

    Numba does this on a function's first call with each new argument type: 0.15 to 0.5 s to
    load from its cache, 1 to 2 s to compile. Processes call this before they serve, so no
    visitor's request pays for it. It never raises: a process that cannot warm still serves.
    """
    # Read-only, like the pixels requests pass (np.asarray of a Pillow image, np.frombuffer
    # of bytes): a writable array is another signature, which Numba would compile separately.
    # The pixel is opaque so that dominant_colors reaches _merge.
    pixel = np.frombuffer(bytes([0, 0, 0, 255]), dtype=np.uint8)
    try:
        dominant_colors(pixel)
        average_luminance(pixel)
    except Exception:
        logger.warning(
            "Warming the palette loops failed; the first analysis will compile them", exc_info=True
        )
