"""The composer on constructed cut-outs: boxes come from the pasted alpha, not the pasted rectangle."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.uouo.compose import BACKGROUND, CANVAS, CELL, SCALE_RANGE, compose, encode_png


def _framed_disc(colour: tuple[int, int, int]) -> Image.Image:
    """A 200x200 crop whose object (a disc of 100 px) sits in a transparent frame."""
    yy, xx = np.mgrid[:200, :200]
    alpha = (((xx - 100) ** 2 + (yy - 100) ** 2) <= 50**2).astype(np.uint8) * 255
    rgba = np.dstack([np.full((200, 200, 3), colour, np.uint8), alpha])
    return Image.fromarray(rgba, "RGBA")


def test_box_is_the_pasted_alpha_not_the_rectangle() -> None:
    colours = [(220, 20, 20), (20, 160, 40), (30, 60, 200), (90, 20, 120)]
    mosaic = compose([_framed_disc(c) for c in colours], np.random.default_rng(7))
    pixels = np.asarray(mosaic.image).astype(int)
    for cell, (box, placement) in enumerate(zip(mosaic.boxes, mosaic.placements)):
        x0, y0, x1, y1 = box
        px, py = placement.offset
        w, h = placement.size
        assert px < x0 and py < y0 and x1 < px + w and y1 < py + h  # strictly inside the pasted rectangle
        # the disc (101 px across) scaled, widened at most by Lanczos' support of 3 source pixels a side
        for extent in (x1 - x0, y1 - y0):
            assert 101 * placement.scale - 2 <= extent <= 107 * placement.scale + 2
        cx, cy = (cell % 2) * CELL, (cell // 2) * CELL
        region = pixels[cy : cy + CELL, cx : cx + CELL]
        drawn = np.any(region != BACKGROUND, axis=2)
        rows, cols = np.nonzero(drawn)
        assert (cx + cols.min(), cy + rows.min(), cx + cols.max() + 1, cy + rows.max() + 1) == box
    assert mosaic.boxes_norm[0] == [v / CANVAS for v in mosaic.boxes[0]]


def test_scale_stays_in_range() -> None:
    crop = Image.new("RGBA", (300, 120), (10, 10, 10, 255))
    for seed in range(20):
        placement = compose([crop] * 4, np.random.default_rng(seed)).placements[0]
        fit = min(CELL / 300, CELL / 120)
        assert SCALE_RANGE[0] * fit <= placement.scale <= SCALE_RANGE[1] * fit
        assert placement.size == (round(300 * placement.scale), round(120 * placement.scale))


def test_same_generator_same_bytes() -> None:
    crops = [_framed_disc((200, 30 * i, 10)) for i in range(4)]
    first = encode_png(compose(crops, np.random.default_rng(1)).image)
    assert encode_png(compose(crops, np.random.default_rng(1)).image) == first
    assert encode_png(compose(crops, np.random.default_rng(2)).image) != first


def test_four_cutouts_exactly() -> None:
    with pytest.raises(ValueError, match="takes 4 cut-outs, got 3"):
        compose([_framed_disc((1, 2, 3))] * 3, np.random.default_rng(0))
