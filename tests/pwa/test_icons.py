"""The app icons: the committed PNGs are pwa.icons' output, and they draw what they claim."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.contrib.staticfiles import finders
from PIL import Image

from pwa import icons

REPO = Path(__file__).resolve().parents[2]
BLUE = np.array(icons.BLUE)
ANY = [icon for icon in icons.GENERATED if icon.purpose == "any"]
FULL_BLEED = [icon for icon in icons.GENERATED if icon.purpose == "maskable"]


def committed(icon: icons.Icon) -> Path:
    # Through the staticfiles finders, so the path is also what {% static %} resolves.
    found = finders.find(icon.path)
    assert found, f"{icon.path} is not committed under static/"
    return Path(found)


def pixels(icon: icons.Icon) -> np.ndarray:
    with Image.open(committed(icon)) as image:
        return np.asarray(image).astype(int)


def by_path(icon: icons.Icon) -> str:
    return icon.path


def test_the_manifest_icons_are_the_three_the_manifest_needs():
    assert [(i.path, i.size, i.purpose, i.mime_type) for i in icons.ICONS] == [
        ("icons/icon-192.png", 192, "any", "image/png"),
        ("icons/icon-512.png", 512, "any", "image/png"),
        ("icons/icon-maskable-512.png", 512, "maskable", "image/png"),
    ]
    assert icons.APPLE_TOUCH_ICON not in icons.ICONS


@pytest.mark.parametrize("icon", icons.GENERATED, ids=by_path)
def test_regenerating_an_icon_gives_the_committed_bytes(icon, tmp_path):
    icons.write(static_dir=tmp_path)
    assert (tmp_path / icon.path).read_bytes() == committed(icon).read_bytes(), (
        "run `python -m pwa.icons` and commit the result"
    )


def test_check_passes_on_the_committed_icons():
    result = subprocess.run(
        [sys.executable, "-m", "pwa.icons", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")


def test_check_exits_1_and_names_only_the_icon_that_differs(tmp_path, capsys):
    icons.write(static_dir=tmp_path)
    (tmp_path / "icons/icon-192.png").write_bytes(b"not the icon")

    assert icons.main(["--check", "--static-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "icon-192.png" in err
    assert "icon-512.png" not in err
    assert "apple-touch-icon.png" not in err


def test_check_names_a_missing_icon(tmp_path, capsys):
    shutil.rmtree(tmp_path)

    assert icons.main(["--check", "--static-dir", str(tmp_path)]) == 1
    assert "icon-maskable-512.png" in capsys.readouterr().err


def test_check_writes_nothing(tmp_path):
    icons.main(["--check", "--static-dir", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("path", "size", "mode"),
    [
        ("icons/icon-192.png", (192, 192), "RGBA"),
        ("icons/icon-512.png", (512, 512), "RGBA"),
        ("icons/icon-maskable-512.png", (512, 512), "RGB"),
        ("icons/apple-touch-icon.png", (180, 180), "RGB"),
    ],
)
def test_each_icon_is_a_png_of_its_size_and_mode(path, size, mode):
    with Image.open(finders.find(path)) as image:
        assert (image.format, image.size, image.mode) == ("PNG", size, mode)
        # No text, time or dpi chunks: nothing in the file but the picture.
        assert image.info == {}


@pytest.mark.parametrize("icon", FULL_BLEED, ids=by_path)
def test_the_full_bleed_icons_are_opaque(icon):
    with Image.open(committed(icon)) as image:
        # An RGB PNG can still be transparent through a tRNS chunk; RGBA conversion honours it.
        alpha = np.asarray(image.convert("RGBA"))[..., 3]
    assert alpha.min() == 255


@pytest.mark.parametrize("icon", FULL_BLEED, ids=by_path)
def test_the_full_bleed_icons_keep_every_pixel_of_the_v_in_the_safe_zone(icon):
    rgb = pixels(icon)
    size = icon.size
    # Anything off the background blue, anti-aliasing fringe and ringing included.
    ys, xs = np.nonzero(np.abs(rgb - BLUE).max(axis=2) > 2)
    assert len(xs) > 0
    # The pixel's corner farthest from the centre, so the whole square must be inside.
    far = np.hypot(np.abs(xs + 0.5 - size / 2) + 0.5, np.abs(ys + 0.5 - size / 2) + 0.5)
    assert far.max() <= icons.SAFE_ZONE * size


@pytest.mark.parametrize("icon", FULL_BLEED, ids=by_path)
def test_the_full_bleed_v_is_not_shrunk_to_a_speck(icon):
    rgb = pixels(icon)
    white = rgb.min(axis=2) >= 128
    ys, xs = np.nonzero(white)
    assert (xs.max() - xs.min() + 1) / icon.size >= 0.35
    assert (ys.max() - ys.min() + 1) / icon.size >= 0.35


@pytest.mark.parametrize("icon", icons.GENERATED, ids=by_path)
def test_the_v_is_anti_aliased(icon):
    # Pillow's shapes alone are all-or-nothing: only blue and white. Along the V's edges a
    # downsampled drawing has blends, about one per pixel of outline (four arm edges, each
    # over half the size long).
    red = pixels(icon)[..., 0]
    blends = np.count_nonzero((red > icons.BLUE[0] + 16) & (red < 255 - 16))
    assert blends >= icon.size


@pytest.mark.parametrize("icon", ANY, ids=by_path)
def test_the_any_icons_are_the_rounded_tile_with_a_white_v(icon):
    rgba = pixels(icon)
    size = icon.size

    def at(x: float, y: float) -> list[int]:
        # A point in favicon.svg's 32-unit viewBox, to the pixel that holds it.
        return rgba[math.floor(y * size / 32), math.floor(x * size / 32)].tolist()

    last = size - 1
    for corner in [(0, 0), (0, last), (last, 0), (last, last)]:
        assert rgba[corner][3] == 0
    # The tile runs to the edges between the rounded corners.
    for edge in [(16, 0.1), (16, 31.9), (0.1, 16), (31.9, 16)]:
        assert at(*edge) == [*icons.BLUE, 255]
    # The centre of the stroke: both ends, the bottom join and the middle of each arm.
    for on_stroke in [(8, 9), (24, 9), (16, 24), (12, 16.5), (20, 16.5)]:
        assert at(*on_stroke) == [255, 255, 255, 255]
    # Inside the V's opening is tile, not stroke.
    assert at(16, 14) == [*icons.BLUE, 255]


def test_the_192_icon_resembles_the_512_one_downscaled():
    small, large = (Image.open(committed(icon)) for icon in ANY)
    with small, large:

        def on_white(image: Image.Image) -> np.ndarray:
            # Compared as seen: the colour of a nearly transparent pixel means nothing.
            backdrop = Image.new("RGBA", image.size, (255, 255, 255, 255))
            return np.asarray(Image.alpha_composite(backdrop, image)).astype(int)

        downscaled = large.resize(small.size, Image.Resampling.LANCZOS)
        difference = np.abs(on_white(small) - on_white(downscaled))
    assert difference.mean() < 2


def test_the_v_reaches_from_its_far_ends_plus_half_the_stroke():
    # (8, 9) and (24, 9) are hypot(8, 7) from the centre (16, 16); the bottom (16, 24) only 8.
    assert icons.v_reach() == pytest.approx(math.hypot(8, 7) + 3.5 / 2)
