"""The site's app icons, drawn from the mark in static/icons/favicon.svg.

The PNGs under static/icons/ are this module's output, committed so that a deploy needs no
drawing step; `python -m pwa.icons` rewrites them and `python -m pwa.icons --check` fails when
they no longer match. Regenerate after changing the mark here *and* in favicon.svg: the two
describe the same picture and nothing else keeps them in step.

The bytes are a function of the geometry and of Pillow (with the zlib it bundles), so an upgrade
that rasterises or compresses differently shows up as --check failing; rerunning fixes it.
"""

from __future__ import annotations

import argparse
import io
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PIL import Image, ImageDraw

# The mark, in favicon.svg's 32×32 viewBox units.
TILE = 32
TILE_RADIUS = 7
BLUE = (0x0B, 0x57, 0xD0)
WHITE = (0xFF, 0xFF, 0xFF)
V_POINTS = ((8, 9), (16, 24), (24, 9))
V_STROKE = 3.5

# The W3C maskable icon spec keeps content inside a circle of radius 40 % of the size; the V's
# farthest edge sits a tenth inside it, so the anti-aliased fringe stays in too.
SAFE_ZONE = 0.40
MASKABLE_REACH = 0.9 * SAFE_ZONE

# Drawn at this multiple of the output size, then LANCZOS-downsampled: Pillow's shapes are not
# anti-aliased themselves.
SUPERSAMPLE = 4

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"


@dataclass(frozen=True, kw_only=True)
class Icon:
    """One PNG: where it lives under static/, and what a manifest says about it.

    purpose is the manifest's: "any" is the rounded tile on transparency; "maskable" is
    full-bleed and opaque, the V shrunk into the safe zone for the platform to crop.
    """

    path: str
    size: int
    purpose: Literal["any", "maskable"]
    mime_type: str = "image/png"


# What the web app manifest lists.
ICONS = (
    Icon(path="icons/icon-192.png", size=192, purpose="any"),
    Icon(path="icons/icon-512.png", size=512, purpose="any"),
    Icon(path="icons/icon-maskable-512.png", size=512, purpose="maskable"),
)
# Linked with <link rel="apple-touch-icon">, not from the manifest. iOS rounds the corners
# itself and shows transparency as black, so it is drawn as a maskable icon.
APPLE_TOUCH_ICON = Icon(path="icons/apple-touch-icon.png", size=180, purpose="maskable")
GENERATED = (*ICONS, APPLE_TOUCH_ICON)


def v_reach() -> float:
    """Return how far the V's stroke reaches from the tile's centre, in mark units."""
    # The stroke is the polyline swept by a disc; a segment's farthest point from any
    # centre is one of its ends, so the vertices decide.
    centre = TILE / 2
    return max(math.hypot(x - centre, y - centre) for x, y in V_POINTS) + V_STROKE / 2


def render(icon: Icon) -> Image.Image:
    """Draw the icon at its size: RGBA for "any", opaque RGB for "maskable"."""
    canvas = icon.size * SUPERSAMPLE
    unit = canvas / TILE  # canvas pixels per mark unit
    if icon.purpose == "any":
        image = Image.new("RGBA", (canvas, canvas), (0, 0, 0, 0))
        draw = ImageDraw.Draw(image)
        draw.rounded_rectangle(
            (0, 0, canvas - 1, canvas - 1), radius=round(TILE_RADIUS * unit), fill=(*BLUE, 255)
        )
        scale = unit
    else:
        image = Image.new("RGB", (canvas, canvas), BLUE)
        draw = ImageDraw.Draw(image)
        scale = unit * MASKABLE_REACH * TILE / v_reach()
    # Scale about the centre; the -0.5 moves from SVG's pixel edges to Pillow's pixel centres.
    middle = canvas / 2 - 0.5
    points = [
        (middle + (x - TILE / 2) * scale, middle + (y - TILE / 2) * scale) for x, y in V_POINTS
    ]
    stroke(draw, points=points, half_width=V_STROKE / 2 * scale)
    # Pillow resamples RGBA premultiplied, so the transparent corners bleed no black into the edge.
    return image.resize((icon.size, icon.size), Image.Resampling.LANCZOS)


def stroke(
    draw: ImageDraw.ImageDraw, *, points: Sequence[tuple[float, float]], half_width: float
) -> None:
    """Stroke a polyline in white with round caps and joins, as SVG does."""
    # A round-capped, round-joined stroke is the union of one rectangle per segment and one
    # disc per vertex; drawing that union avoids Pillow's square line ends.
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        length = math.hypot(x1 - x0, y1 - y0)
        nx, ny = -(y1 - y0) / length * half_width, (x1 - x0) / length * half_width
        draw.polygon(
            [(x0 + nx, y0 + ny), (x1 + nx, y1 + ny), (x1 - nx, y1 - ny), (x0 - nx, y0 - ny)],
            fill=WHITE,
        )
    for x, y in points:
        draw.ellipse((x - half_width, y - half_width, x + half_width, y + half_width), fill=WHITE)


def encode(icon: Icon) -> bytes:
    """Return the icon's PNG bytes, the same on every run."""
    buffer = io.BytesIO()
    # A fresh image carries no info dict, so no text, time or dpi chunks; the options are
    # spelled out so a change of Pillow's defaults cannot change the bytes.
    render(icon).save(buffer, format="PNG", optimize=False, compress_level=9)
    return buffer.getvalue()


def write(*, static_dir: Path) -> list[Path]:
    """Write every generated icon under static_dir and return the paths written."""
    written = []
    for icon in GENERATED:
        target = static_dir / icon.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(encode(icon))
        written.append(target)
    return written


def stale(*, static_dir: Path) -> list[Path]:
    """Return the icons under static_dir that are missing or differ from what render draws."""
    return [
        static_dir / icon.path
        for icon in GENERATED
        if not (static_dir / icon.path).is_file()
        or (static_dir / icon.path).read_bytes() != encode(icon)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pwa.icons", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if an icon is out of date"
    )
    parser.add_argument("--static-dir", type=Path, default=STATIC_DIR)
    args = parser.parse_args(argv)
    if args.check:
        differing = stale(static_dir=args.static_dir)
        for path in differing:
            print(f"{path} differs from what pwa.icons draws", file=sys.stderr)
        if differing:
            print("Run `python -m pwa.icons` and commit the result.", file=sys.stderr)
        return 1 if differing else 0
    for path in write(static_dir=args.static_dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
