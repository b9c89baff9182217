"""Compose one UOUO mosaic from four cut-outs (the pixel half of the spec in ``docs/uouo.md``).

The canvas is :data:`CANVAS` x :data:`CANVAS` pixels of the plain :data:`BACKGROUND`
colour (white), split into four :data:`CELL` x :data:`CELL` cells in the order of
:data:`rf100vl_hf.uouo.prompts.QUADRANTS`: top-left, top-right, bottom-left,
bottom-right. Cell ``i`` receives cut-out ``i``:

1. crop the cut-out to its alpha box;
2. scale it by ``factor * fit``, where ``fit`` is the largest scale at which it fits the
   cell and ``factor`` is drawn uniformly from :data:`SCALE_RANGE` (the recorded
   ``scale`` is the resulting source-to-canvas factor; the pasted ``size`` is rounded to
   whole pixels). Resampling is Lanczos on premultiplied alpha, so transparent pixels
   do not bleed their colour into the object's edge;
3. flip it horizontally with probability :data:`FLIP_PROBABILITY`;
4. jitter it: its top-left corner is drawn uniformly among the positions that keep it
   entirely inside the cell;
5. alpha-composite it onto the canvas.

The ground-truth box of an object is the tight box of the pasted alpha (pixels with
alpha above 0) after all of that, not the pasted rectangle: ``xyxy`` in canvas pixels
with exclusive ends, so ``box / CANVAS`` lies in [0, 1]. Every random draw comes from
the generator passed in, so a mosaic is a pure function of its cut-outs and that
generator; PNG encoding uses fixed settings and no metadata, so equal pixels give equal
bytes.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image

from rf100vl_hf.uouo.sources import alpha_box

CANVAS = 800
CELL = CANVAS // 2
BACKGROUND = (255, 255, 255)
SCALE_RANGE = (0.5, 0.95)
FLIP_PROBABILITY = 0.5
PNG_COMPRESS_LEVEL = 6
"""zlib's default: 6-20% smaller files than level 1 for about twice the encoding time
(``benchmarks/test_uouo_speed.py``); a dataset is built once and downloaded many times."""
CELL_ORIGINS = ((0, 0), (CELL, 0), (0, CELL), (CELL, CELL))
"""Top-left corner of each cell, in the order of ``QUADRANTS``."""


@dataclass(frozen=True)
class Placement:
    """The recorded augmentation of one object."""

    scale: float  # source pixels -> canvas pixels
    flip: bool  # mirrored left-right
    offset: tuple[int, int]  # canvas position of the scaled crop's top-left corner
    size: tuple[int, int]  # the scaled crop's width and height


@dataclass(frozen=True)
class Mosaic:
    image: Image.Image  # RGB, CANVAS x CANVAS
    placements: list[Placement]
    boxes: list[tuple[int, int, int, int]]  # tight xyxy of each object's pasted alpha

    @property
    def boxes_norm(self) -> list[list[float]]:
        return [[v / CANVAS for v in box] for box in self.boxes]


def draw_placement(crop_size: tuple[int, int], cell: int, rng: np.random.Generator) -> Placement:
    """Scale, flip and position of a crop of ``crop_size`` in cell ``cell``."""
    width, height = crop_size
    factor = rng.uniform(*SCALE_RANGE)
    scale = factor * min(CELL / width, CELL / height)
    size = (min(CELL, max(1, round(width * scale))), min(CELL, max(1, round(height * scale))))
    flip = bool(rng.random() < FLIP_PROBABILITY)
    x0, y0 = CELL_ORIGINS[cell]
    offset = (x0 + int(rng.integers(0, CELL - size[0] + 1)), y0 + int(rng.integers(0, CELL - size[1] + 1)))
    return Placement(scale=float(scale), flip=flip, offset=offset, size=size)


def transform(crop: Image.Image, placement: Placement) -> Image.Image:
    """The RGBA crop as it is pasted: scaled (premultiplied Lanczos), then flipped."""
    scaled = crop.convert("RGBa").resize(placement.size, Image.Resampling.LANCZOS).convert("RGBA")
    return scaled.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if placement.flip else scaled


def compose(crops: list[Image.Image], rng: np.random.Generator) -> Mosaic:
    """Paste four RGBA crops (already cut to their alpha boxes) into the four cells."""
    if len(crops) != len(CELL_ORIGINS):
        raise ValueError(f"a mosaic takes {len(CELL_ORIGINS)} cut-outs, got {len(crops)}")
    canvas = Image.new("RGBA", (CANVAS, CANVAS), (*BACKGROUND, 255))
    placements, boxes = [], []
    for cell, crop in enumerate(crops):
        placement = draw_placement(crop.size, cell, rng)
        pasted = transform(crop, placement)
        canvas.alpha_composite(pasted, placement.offset)
        box = alpha_box(np.asarray(pasted.getchannel("A")))
        if box is None:
            raise ValueError(f"cut-out {cell} vanished when scaled to {placement.size}")
        x, y = placement.offset
        boxes.append((box[0] + x, box[1] + y, box[2] + x, box[3] + y))
        placements.append(placement)
    return Mosaic(canvas.convert("RGB"), placements, boxes)


def encode_png(image: Image.Image) -> bytes:
    """PNG bytes with fixed settings and no metadata: equal pixels give equal bytes."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()
