"""Box conventions (``adapters/coordinates.py``): every convention's numbers read as pixels and
written back, worked by hand on a non-square image, and Qwen2.5's resize checked against
transformers' own ``smart_resize``."""

from __future__ import annotations

import pytest

from pytest_rf100vl.adapters.coordinates import CONVENTIONS, BoxConvention, qwen25_resized

WIDE = (300, 200)
# The box (30, 40, 150, 120) of a 300x200 image in each convention, worked by hand:
# qwen2.5 frame 308x196 (300/28 = 10.7 -> 11 * 28, 200/28 = 7.1 -> 7 * 28): 30 * 308/300 = 30.8,
# 40 * 196/200 = 39.2, 150 * 308/300 = 154, 120 * 196/200 = 117.6; qwen3: x / 300 * 1000,
# y / 200 * 1000; gemini: the same, y first; normalized: x / 300, y / 200; square: the image
# padded to 300x300, (300 - 200) // 2 = 50 rows above it: x / 300, (y + 50) / 300.
WRITTEN = {
    "qwen2.5": [30.8, 39.2, 154.0, 117.6],
    "qwen3": [100.0, 200.0, 500.0, 600.0],
    "gemini": [200.0, 100.0, 600.0, 500.0],
    "normalized": [0.1, 0.2, 0.5, 0.6],
    "pixels": [30.0, 40.0, 150.0, 120.0],
    "square": [0.1, 0.3, 0.5, 170 / 300],
}
TRUNCATED = {  # as few-shot answers write them: whole units, truncated (normalized: 4 decimals)
    "qwen2.5": [30, 39, 154, 117],
    "qwen3": [100, 200, 500, 600],
    "gemini": [200, 100, 600, 500],
    "normalized": [0.1, 0.2, 0.5, 0.6],
    "pixels": [30, 40, 150, 120],
    "square": [0.1, 0.3, 0.5, 0.5667],
}


@pytest.mark.parametrize("name", CONVENTIONS)
def test_each_convention_reads_its_numbers_as_pixels_of_the_image_sent(name: str) -> None:
    convention = BoxConvention(name)
    assert convention.to_pixels(tuple(WRITTEN[name]), *WIDE) == pytest.approx((30.0, 40.0, 150.0, 120.0), abs=1e-9)
    a, b, c, d = WRITTEN[name]
    assert convention.to_pixels((c, d, a, b), *WIDE) == pytest.approx((30.0, 40.0, 150.0, 120.0), abs=1e-9)


@pytest.mark.parametrize("name", CONVENTIONS)
def test_ground_truth_is_written_in_the_conventions_own_numbers(name: str) -> None:
    written = BoxConvention(name).from_pixels((30.0, 40.0, 150.0, 120.0), *WIDE)
    assert written == pytest.approx(TRUNCATED[name])
    assert [type(v) for v in written] == [type(v) for v in TRUNCATED[name]]


def test_qwen25_resize_limits_change_its_frame() -> None:
    small = BoxConvention("qwen2.5", min_pixels=28 * 28, max_pixels=28 * 28 * 4)  # at most 4 patches
    # 308x196 is too large: beta = sqrt(300 * 200 / 3136) = 4.37; 300/4.37/28 = 2.45 -> 2 patches
    # wide, 200/4.37/28 = 1.63 -> 1 patch high
    assert small.frame(*WIDE) == ((300.0, 200.0), (56.0, 28.0), (0.0, 0.0))
    assert small.to_pixels((28.0, 14.0, 56.0, 28.0), *WIDE) == pytest.approx((150.0, 100.0, 300.0, 200.0))


@pytest.mark.parametrize("size", [(300, 200), (200, 300), (128, 128), (5000, 4000), (10, 1000), (30, 30), (1, 150),
                                  (4096, 33), (27, 29), (1920, 1080)])
def test_qwen25_resize_is_transformers_smart_resize(size: tuple[int, int]) -> None:
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    width, height = size
    for limits in ((56 * 56, 16384 * 28 * 28), (28 * 28 * 4, 28 * 28 * 16)):
        resized_h, resized_w = smart_resize(height, width, factor=28, min_pixels=limits[0], max_pixels=limits[1])
        assert qwen25_resized(width, height, *limits) == (resized_w, resized_h)
    assert qwen25_resized(5000, 4000, 56 * 56, 16384 * 28 * 28) == (4004, 3192)  # scaled down into max_pixels


def test_bad_conventions_and_images_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown box convention 'xywh'"):
        BoxConvention("xywh")
    with pytest.raises(ValueError, match="more elongated than 200:1"):
        BoxConvention("qwen2.5").to_pixels((0, 0, 1, 1), 4000, 10)
