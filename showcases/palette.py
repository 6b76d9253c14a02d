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
    return usable[usable[:, 3] >= ALPHA_MIN]


def _round_half_up(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    # floor((2·sum + count) / (2·count)) on exact integers, as palette.js does.
    sums = sums.astype(np.int64)
    counts = counts.astype(np.int64)
    return (2 * sums + counts) // (2 * counts)


def _histogram(rgba: np.ndarray):
    r = rgba[:, 0].astype(np.intp)
    g = rgba[:, 1].astype(np.intp)
    b = rgba[:, 2].astype(np.intp)
    keys = ((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3)
    counts = np.bincount(keys, minlength=BUCKETS)
    sums = np.stack(
        [np.bincount(keys, weights=channel, minlength=BUCKETS) for channel in (r, g, b)]
    )
    return counts, sums


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
