"""Dominant colours and mean luminance of straight RGBA8 pixels: the palette spec in DESIGN.md.

The NumPy twin of static/showcases/palette.js. Both use integer arithmetic only (sums are
exact in float64 below 2**53), so on the same bytes they return the same swatches, in the
same order, with the same shares, bit for bit.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

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


def _rgba(pixels: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    """Return the counting pixels as an (n, 4) uint8 array; a trailing partial pixel is dropped."""
    if isinstance(pixels, np.ndarray):
        if pixels.dtype != np.uint8:
            raise TypeError(f"pixels must be uint8, not {pixels.dtype}")
        flat = pixels.reshape(-1)
    else:
        flat = np.frombuffer(pixels, dtype=np.uint8)
    usable = flat[: flat.size - flat.size % 4].reshape(-1, 4)
    alpha = usable[:, 3]
    if alpha.size and alpha.min() < ALPHA_MIN:
        usable = usable[alpha >= ALPHA_MIN]
    return usable


def _round_half_up(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    # floor((2·sum + count) / (2·count)) on exact integers, as palette.js does.
    return (2 * sums + counts) // (2 * counts)


# Below this many pixels, four bincounts over the bucket keys are quickest. Above it, one
# bincount over the full 24-bit colours, whose 16.7 M bins are then folded into the 32,768
# buckets (each bucket is 8 × 8 × 8 colours): that avoids both the per-pixel key arithmetic
# and the slow weighted bincounts. Both paths give the same exact integers.
FULL_COLOUR_FROM = 2_000_000


def _histogram(rgba: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return per-bucket pixel counts (32768,) and channel sums (3, 32768), as int64."""
    if rgba.shape[0] >= FULL_COLOUR_FROM:
        return _histogram_by_colour(rgba)
    r = rgba[:, 0].astype(np.intp)
    g = rgba[:, 1].astype(np.intp)
    b = rgba[:, 2].astype(np.intp)
    keys = ((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3)
    counts = np.bincount(keys, minlength=BUCKETS)
    # Weighted bincounts add in float64: exact here, where every sum is far below 2**53.
    sums = np.stack(
        [np.bincount(keys, weights=channel, minlength=BUCKETS) for channel in (r, g, b)]
    ).astype(np.int64)
    return counts, sums


def _histogram_by_colour(rgba: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Little-endian words: colour = r | g << 8 | b << 16.
    words = np.ascontiguousarray(rgba).reshape(-1).view("<u4")
    colours = (words & 0xFFFFFF).astype(np.intp)
    hist = np.bincount(colours, minlength=1 << 24)
    # Axes: b >> 3, b & 7, g >> 3, g & 7, r >> 3, r & 7.
    h = hist.reshape(32, 8, 32, 8, 32, 8)
    low = np.arange(8, dtype=np.int64)
    by_b_bl_g_r_rl = h.sum(axis=3)
    by_b_g_r_rl = by_b_bl_g_r_rl.sum(axis=1)
    counts = by_b_g_r_rl.sum(axis=3)  # (b5, g5, r5)
    low_r = by_b_g_r_rl @ low
    low_b = by_b_bl_g_r_rl.sum(axis=4).transpose(0, 2, 3, 1) @ low
    low_g = h.sum(axis=(1, 5)).transpose(0, 1, 3, 2) @ low
    five = np.arange(32, dtype=np.int64) * 8  # the bucket's high bits, as a channel value
    sums_bgr = [
        counts * five[None, None, :] + low_r,
        counts * five[None, :, None] + low_g,
        counts * five[:, None, None] + low_b,
    ]

    # Bucket key = r5 << 10 | g5 << 5 | b5: reorder (b5, g5, r5) to (r5, g5, b5).
    def by_key(a: np.ndarray) -> np.ndarray:
        return a.transpose(2, 1, 0).reshape(-1)

    return by_key(counts), np.stack([by_key(s) for s in sums_bgr])


def dominant_colors(
    pixels: bytes | bytearray | memoryview | np.ndarray, count: int = 6
) -> list[Swatch]:
    """Return up to count swatches, most common first: [{hex, r, g, b, share}]."""
    rgba = _rgba(pixels)
    counted = rgba.shape[0]
    if counted == 0 or count <= 0:
        return []
    counts, sums = _histogram(rgba)

    keys = np.flatnonzero(counts)
    # Count descending, then key ascending: lexsort sorts by its last key first.
    keys = keys[np.lexsort((keys, -counts[keys]))]
    colours = _round_half_up(sums[:, keys], counts[keys]).T

    founders: list[tuple[int, int, int]] = []
    founder_keys: list[int] = []
    merged_counts: list[int] = []
    merged_sums: list[list[int]] = []
    for key, (r, g, b) in zip(keys.tolist(), colours.tolist(), strict=True):
        home = -1
        for index, (r0, g0, b0) in enumerate(founders):
            dr, dg, db = r - r0, g - g0, b - b0
            if 2 * dr * dr + 4 * dg * dg + 3 * db * db < MERGE_BELOW:
                home = index
                break
        if home >= 0:
            merged_counts[home] += int(counts[key])
            for channel in range(3):
                merged_sums[home][channel] += int(sums[channel, key])
        elif len(founders) < count:
            founders.append((r, g, b))
            founder_keys.append(key)
            merged_counts.append(int(counts[key]))
            merged_sums.append([int(sums[channel, key]) for channel in range(3)])

    order = sorted(range(len(founders)), key=lambda i: (-merged_counts[i], founder_keys[i]))
    swatches: list[Swatch] = []
    for i in order:
        n = merged_counts[i]
        r, g, b = ((2 * s + n) // (2 * n) for s in merged_sums[i])
        swatches.append(
            {"hex": f"#{r:02x}{g:02x}{b:02x}", "r": r, "g": g, "b": b, "share": n / counted}
        )
    return swatches


def average_luminance(pixels: bytes | bytearray | memoryview | np.ndarray) -> float:
    """Return the mean gamma-encoded Rec. 709 luminance of the counting pixels, 0 to 1."""
    rgba = _rgba(pixels)
    counted = rgba.shape[0]
    if counted == 0:
        return 0.0
    weighted = (
        2126 * int(rgba[:, 0].sum(dtype=np.int64))
        + 7152 * int(rgba[:, 1].sum(dtype=np.int64))
        + 722 * int(rgba[:, 2].sum(dtype=np.int64))
    )
    return weighted / (counted * 2_550_000)
