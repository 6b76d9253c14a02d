"""Palette benchmarks, on a real photograph (matplotlib's grace_hopper.jpg) upscaled to 12 MP.

(a) The server lane end to end, JPEG bytes → palette (showcases/analysis.py, JPEG draft mode
    before the 720 px resize), beside a full Pillow decode + fast-colorthief and a full decode
    + colorthief (quality 10).
(b) palette.py on the full 12 MP RGBA, beside a bare np.bincount of its 15-bit bucket keys.
(c) palette.js under Node on the same RGBA, beside npm colorthief over all pixels (quality 1).

    make bench        # or: .venv/bin/python bench/palette.py [--runs N]

Needs the bench extra (pip install -e '.[bench]') and `npm install --prefix bench`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only-secret-key-0123456789-abcdefghij")

TWELVE_MP = 12_000_000


def photo_12mp() -> bytes:
    """grace_hopper.jpg (512 × 600) upscaled to about 12 MP, as a JPEG."""
    from matplotlib import cbook

    source = Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)).convert("RGB")
    scale = (TWELVE_MP / (source.width * source.height)) ** 0.5
    size = (round(source.width * scale), round(source.height * scale))
    buffer = io.BytesIO()
    source.resize(size, Image.Resampling.BICUBIC).save(buffer, format="JPEG", quality=92)
    return buffer.getvalue()


def median_ms(work, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    import django

    django.setup()
    import colorthief
    import fast_colorthief

    from showcases import analysis, palette

    jpeg = photo_12mp()
    rgba = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGBA"))
    height, width = rgba.shape[:2]
    runs = args.runs

    # (a) JPEG bytes → palette.
    server = median_ms(lambda: analysis.analyse(jpeg), runs)
    fast = median_ms(
        lambda: fast_colorthief.get_palette(
            np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGBA")), 6, 10
        ),
        runs,
    )
    slow = median_ms(
        lambda: colorthief.ColorThief(io.BytesIO(jpeg)).get_palette(color_count=6, quality=10),
        max(1, runs // 2),
    )
    # Warm up once: the first call loads (or compiles) the Numba kernels.
    palette.dominant_colors(rgba)

    # (b) palette.py against a bare bincount of its own keys.
    flat = rgba.reshape(-1, 4)
    keys = (
        (flat[:, 0].astype(np.intp) >> 3) << 10
        | (flat[:, 1].astype(np.intp) >> 3) << 5
        | (flat[:, 2].astype(np.intp) >> 3)
    )
    ours_py = median_ms(lambda: palette.dominant_colors(rgba), runs)
    bincount = median_ms(lambda: np.bincount(keys, minlength=palette.BUCKETS), runs)

    # (c) palette.js against npm colorthief, in Node.
    with tempfile.NamedTemporaryFile(suffix=".rgba") as raw:
        raw.write(rgba.tobytes())
        raw.flush()
        node = subprocess.run(
            [
                "node",
                str(BASE_DIR / "bench" / "palette_node.mjs"),
                raw.name,
                str(width),
                str(height),
                str(runs),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    js = json.loads(node.stdout)

    print(
        f"\nPalette benchmarks: grace_hopper.jpg upscaled to {width} × {height} "
        f"({width * height / 1e6:.1f} MP), medians of {runs}\n"
    )
    print("| measurement | ms | ratio | target |")
    print("| --- | ---: | ---: | --- |")
    print(f"| (a) server lane, JPEG bytes → palette | {server:.0f} | | ≤ 150 ms |")
    print(
        f"| (a) full decode + fast-colorthief (quality 10) | {fast:.0f} | "
        f"{fast / server:.2f}× ours | ours ≥ 1.3× faster |"
    )
    print(
        f"| (a) full decode + colorthief (quality 10) | {slow:.0f} | "
        f"{slow / server:.1f}× ours | ours ≥ 10× faster |"
    )
    print(
        f"| (b) palette.py, full 12 MP RGBA | {ours_py:.0f} | "
        f"{ours_py / bincount:.2f}× bincount | ≤ 2× bincount |"
    )
    print(f"| (b) bare np.bincount of the bucket keys | {bincount:.0f} | 1.00 | |")
    print(
        f"| (c) palette.js dominantColors under Node, 12 MP | {js['paletteJs']:.0f} | | ≤ 150 ms |"
    )
    print(f"| (c) palette.js averageLuminance, same pixels | {js['luminanceJs']:.0f} | | |")
    print(
        f"| (c) npm colorthief, all pixels (quality 1) | {js['colorthief']:.0f} | "
        f"{js['colorthief'] / js['paletteJs']:.1f}× ours | ours ≥ 15× faster |"
    )


if __name__ == "__main__":
    main()
