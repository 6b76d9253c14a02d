"""palette.py against the spec, and palette.js against palette.py, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from showcases.palette import average_luminance, dominant_colors


def px(*pixels: tuple[int, int, int, int]) -> bytes:
    return bytes(v for p in pixels for v in p)


def hexes(swatches) -> list[str]:
    return [s["hex"] for s in swatches]


# Each case: name, pixel bytes, count. Used by the spec tables and by the parity test.
CASES = {
    "empty": (b"", 6),
    "partial pixel only": (bytes([10, 20, 30]), 6),
    "one pixel and a partial one": (px((10, 20, 30, 255)) + bytes([1, 2]), 6),
    "all transparent": (px((255, 0, 0, 0), (0, 255, 0, 127)), 6),
    "alpha 128 counts, 127 does not": (px((255, 0, 0, 128), (0, 0, 255, 127)), 6),
    "250 and 252 share a bucket": (px((250, 0, 0, 255), (252, 0, 0, 255)), 6),
    "half rounds up": (px((1, 0, 0, 255), (2, 0, 0, 255)), 6),
    "ties go to the lower key": (px((0, 0, 255, 255), (255, 0, 0, 255)), 6),
    "near colours merge": (px((100, 100, 100, 255), (100, 100, 100, 255), (110, 100, 100, 255)), 6),
    "far colours stay apart": (px((0, 0, 0, 255), (255, 255, 255, 255)), 6),
    "count caps the entries": (
        px(*[(i * 40, 255 - i * 40, (i * 90) % 256, 255) for i in range(7)]),
        3,
    ),
    "count zero": (px((1, 2, 3, 255)), 0),
}


def test_nothing_counts_in_an_empty_or_transparent_image():
    for name in ("empty", "partial pixel only", "all transparent"):
        pixels, count = CASES[name]
        assert dominant_colors(pixels, count) == []
        assert average_luminance(pixels) == 0.0


def test_alpha_128_counts_and_127_does_not():
    assert hexes(dominant_colors(CASES["alpha 128 counts, 127 does not"][0])) == ["#ff0000"]


def test_a_trailing_partial_pixel_is_ignored():
    [swatch] = dominant_colors(CASES["one pixel and a partial one"][0])
    assert (swatch["hex"], swatch["share"]) == ("#0a141e", 1.0)


def test_250_and_252_fall_in_one_bucket_whose_colour_is_their_mean():
    # 250 >> 3 == 252 >> 3 == 31; mean (250 + 252) / 2 = 251 = 0xfb.
    assert dominant_colors(CASES["250 and 252 share a bucket"][0]) == [
        {"hex": "#fb0000", "r": 251, "g": 0, "b": 0, "share": 1.0}
    ]


def test_a_mean_of_exactly_half_rounds_up_not_to_even():
    # (1 + 2) / 2 = 1.5 → 2: floor((2·3 + 2) / (2·2)) = floor(8 / 4) = 2.
    assert hexes(dominant_colors(CASES["half rounds up"][0])) == ["#020000"]


def test_equal_counts_are_ordered_by_bucket_key():
    # Blue's key is 31 (0 << 10 | 0 << 5 | 31), red's 31744: blue first.
    assert hexes(dominant_colors(CASES["ties go to the lower key"][0])) == ["#0000ff", "#ff0000"]


def test_near_duplicates_merge_into_the_first_entry():
    # 2·10² = 200 < 5184: the second bucket joins the first; sums 310 / 3 → 103.33 → 103.
    [swatch] = dominant_colors(CASES["near colours merge"][0])
    assert (swatch["hex"], swatch["share"]) == ("#676464", 1.0)


def test_count_caps_the_number_of_entries_and_drops_the_rest():
    swatches = dominant_colors(*CASES["count caps the entries"])
    assert len(swatches) == 3
    assert sum(s["share"] for s in swatches) == pytest.approx(3 / 7)


def test_luminance_is_one_exact_division():
    # (2126·255 + 7152·0 + 722·0) / (1 · 2,550,000) = 542130 / 2550000
    assert average_luminance(px((255, 0, 0, 255))) == 542130 / 2550000
    assert average_luminance(px((255, 255, 255, 255))) == 1.0


def test_flat_and_shaped_numpy_arrays_and_bytes_agree():
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, size=(20, 30, 4), dtype=np.uint8)
    expected = dominant_colors(image.tobytes())
    assert dominant_colors(image) == expected
    assert dominant_colors(image.reshape(-1)) == expected
    assert dominant_colors(bytearray(image.tobytes())) == expected
    assert average_luminance(image) == average_luminance(image.tobytes())


def test_non_uint8_arrays_are_refused():
    with pytest.raises(TypeError, match="uint8"):
        dominant_colors(np.zeros(8, dtype=np.int32))


@pytest.mark.parametrize("name", sorted(CASES))
def test_palette_js_matches_palette_py_on_the_edge_cases(node_palette, name):
    pixels, count = CASES[name]
    answer = node_palette.run(pixels, count)
    assert answer["swatches"] == dominant_colors(pixels, count)
    assert answer["luminance"] == average_luminance(pixels)


# Few colours with clusters, so merging, ties and the cap are all exercised.
_channel = st.sampled_from([0, 1, 2, 7, 8, 100, 101, 127, 128, 200, 250, 251, 252, 255])
_pixel = st.tuples(_channel, _channel, _channel, st.sampled_from([0, 127, 128, 255]))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pixels=st.lists(_pixel, max_size=300).map(lambda ps: px(*ps)) | st.binary(max_size=2000),
    count=st.integers(min_value=0, max_value=8),
)
def test_palette_js_matches_palette_py_on_random_buffers(node_palette, pixels, count):
    answer = node_palette.run(pixels, count)
    assert answer["swatches"] == dominant_colors(pixels, count)
    assert answer["luminance"] == average_luminance(pixels)


def test_palette_js_matches_palette_py_on_a_large_noisy_image(node_palette):
    rng = np.random.default_rng(11)
    base = rng.integers(0, 256, size=(1, 1, 4), dtype=np.uint8)
    image = np.clip(base + rng.normal(0, 40, size=(240, 320, 4)), 0, 255).astype(np.uint8)
    image[..., 3] = 255
    pixels = image.tobytes()
    answer = node_palette.run(pixels)
    assert answer["swatches"] == dominant_colors(pixels)
    assert answer["luminance"] == average_luminance(pixels)
