"""The sample photo for visitors without one: a landscape painted with Pillow and NumPy.

Generated on first request instead of committed as a binary. Deterministic: the same bytes on
every machine, so tests can rely on its palette. Painting takes seconds and several hundred MB
of NumPy arrays, so it happens once per process: requests that arrive meanwhile wait for it
rather than each painting a copy of their own.
"""

from __future__ import annotations

import io
import threading
from functools import cache

import numpy as np
from PIL import Image, ImageFilter

WIDTH, HEIGHT = 2400, 1600


_painting = threading.Lock()


def sample_jpeg() -> bytes:
    """Return the sample photo as JPEG bytes, painted on the first call in this process."""
    with _painting:
        return _paint()


@cache
def _paint() -> bytes:
    rng = np.random.default_rng(2026)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    t = y / HEIGHT

    # Evening sky: deep blue overhead to warm orange at the horizon.
    top = np.array([28, 58, 120], np.float32)
    horizon = np.array([246, 160, 88], np.float32)
    sky = top + (horizon - top) * np.clip(t / 0.55, 0, 1)[..., None] ** 1.4
    image = sky

    # A low sun with a soft glow.
    sun_x, sun_y = 0.68 * WIDTH, 0.47 * HEIGHT
    distance = np.hypot(x - sun_x, y - sun_y)
    glow = np.exp(-((distance / 260) ** 2))[..., None]
    image = image + glow * (np.array([255, 214, 150], np.float32) - image) * 0.85
    image = np.where((distance < 70)[..., None], np.array([255, 236, 190], np.float32), image)

    # Three ridges of hills, nearer ones darker and greener.
    ridges = [
        (0.52, 60, 0.0021, [92, 84, 120]),
        (0.60, 80, 0.0033, [58, 88, 70]),
        (0.70, 70, 0.0047, [34, 62, 38]),
    ]
    for base, amplitude, frequency, colour in ridges:
        phase = rng.uniform(0, 2 * np.pi)
        line = (
            base * HEIGHT
            + amplitude * np.sin(x * frequency + phase)
            + 0.4 * amplitude * np.sin(x * frequency * 3.1 + phase * 2)
        )
        land = (y > line)[..., None]
        shade = np.clip((y - line) / 400, 0, 1)[..., None]
        hill = np.array(colour, np.float32) * (1 - 0.35 * shade)
        image = np.where(land, hill, image)

    # A lake in front reflecting the sky, darker and rippled.
    lake = y > 0.80 * HEIGHT
    mirrored = np.clip(2 * 0.80 * HEIGHT - y, 0, HEIGHT - 1).astype(int)
    ripple = (np.sin(y * 0.35 + np.sin(x * 0.01) * 3) * 6)[..., None]
    reflection = sky[mirrored, x.astype(int)] * 0.7 + ripple
    image = np.where(lake[..., None], reflection, image)

    # Film grain, then a little blur, so neighbouring pixels differ as in a photograph.
    image = image + rng.normal(0, 5, size=image.shape).astype(np.float32)
    picture = Image.fromarray(np.clip(image, 0, 255).astype(np.uint8), "RGB")
    picture = picture.filter(ImageFilter.GaussianBlur(0.8))
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=88, optimize=True)
    return buffer.getvalue()
