"""Where the numbers of a chat model's box live, defined once per convention: how an answer
becomes ``xyxy`` pixels of the image that was sent, and how ground truth is written back in
the model's own numbers (few-shot answers).

- ``qwen2.5``: pixels of the image after Qwen2.5-VL's ``smart_resize`` (sides rounded to
  multiples of 28 inside ``min_pixels..max_pixels``), ``[x1, y1, x2, y2]``. A server applies
  the checkpoint's own processor settings; the defaults here are the Qwen2.5-VL checkpoints'
  (``min_pixels`` 3136, ``max_pixels`` 12845056); DashScope's API takes them per image.
- ``qwen3``: ``[x1, y1, x2, y2]`` over 0..1000 on both axes.
- ``gemini``: ``[ymin, xmin, ymax, xmax]`` over 0..1000 (Google's ``box_2d``).
- ``normalized``: ``[x1, y1, x2, y2]`` as fractions 0..1 of the width and height.
- ``pixels``: ``[x1, y1, x2, y2]`` in pixels of the image that was sent.
- ``square``: ``[x1, y1, x2, y2]`` as fractions 0..1 of the image padded to a square, centred
  (LLaVA's ``expand2square``: the image sits ``(side - width) // 2`` from the left and
  ``(side - height) // 2`` from the top of a ``side = max(width, height)`` square); the frame
  LLaVA-1.5, 1.6 and OneVision were trained to answer in (``adapters/llava.py``).

Boxes are not clipped here: the runner clips and counts in one place
(:func:`rf100vl_hf.boxes.sanitize_detections`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CONVENTIONS: tuple[str, ...] = ("qwen2.5", "qwen3", "gemini", "normalized", "pixels", "square")

QWEN25_MIN_PIXELS = 56 * 56
QWEN25_MAX_PIXELS = 16384 * 28 * 28
"""The Qwen2.5-VL checkpoints' processor settings, which a server such as vLLM applies."""
QWEN25_FACTOR = 28  # patch size 14 x spatial merge 2


def qwen25_resized(width: int, height: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """``(width, height)`` of an image after Qwen2.5-VL's ``smart_resize``: each side rounded to
    a multiple of 28, then both scaled (down, or up) into ``min_pixels..max_pixels`` keeping
    the aspect ratio. Written out here (transformers' own is the reference in the
    tests) so a served model needs neither transformers nor torch."""
    factor = QWEN25_FACTOR
    if max(width, height) / min(width, height) > 200:
        raise ValueError(f"Qwen2.5-VL takes no image more elongated than 200:1 (got {width}x{height})")
    resized_h = round(height / factor) * factor
    resized_w = round(width / factor) * factor
    if resized_h * resized_w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        resized_h = max(factor, math.floor(height / beta / factor) * factor)
        resized_w = max(factor, math.floor(width / beta / factor) * factor)
    elif resized_h * resized_w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        resized_h = math.ceil(height * beta / factor) * factor
        resized_w = math.ceil(width * beta / factor) * factor
    return resized_w, resized_h


@dataclass(frozen=True)
class BoxConvention:
    """One of :data:`CONVENTIONS`, with Qwen2.5's resize parameters (used by ``qwen2.5`` only)."""

    name: str
    min_pixels: int = QWEN25_MIN_PIXELS
    max_pixels: int = QWEN25_MAX_PIXELS

    def __post_init__(self) -> None:
        if self.name not in CONVENTIONS:
            raise ValueError(f"unknown box convention {self.name!r} (use one of {', '.join(CONVENTIONS)})")

    def frame(self, width: int, height: int) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
        """``(span, units, offset)`` per axis: ``units`` of the convention cover ``span`` pixels,
        starting ``offset`` pixels before the image (a value ``v`` on x is
        ``v * span_x / units_x - offset_x`` pixels)."""
        span, offset = (float(width), float(height)), (0.0, 0.0)
        if self.name == "qwen2.5":
            units = tuple(float(v) for v in qwen25_resized(width, height, self.min_pixels, self.max_pixels))
        elif self.name in ("qwen3", "gemini"):
            units = (1000.0, 1000.0)
        elif self.name == "normalized":
            units = (1.0, 1.0)
        elif self.name == "square":
            side = max(width, height)
            span, units, offset = (float(side),) * 2, (1.0, 1.0), (float((side - width) // 2), float((side - height) // 2))
        else:
            units = span
        return span, units, offset  # type: ignore[return-value]

    def to_pixels(self, values: tuple[float, float, float, float], width: int, height: int) -> tuple[float, ...]:
        """An answer's four numbers as ``xyxy`` pixels of a ``width`` x ``height`` image."""
        if self.name == "gemini":
            y1, x1, y2, x2 = values
        else:
            x1, y1, x2, y2 = values
        (span_x, span_y), (units_x, units_y), (ox, oy) = self.frame(width, height)
        sx, sy = span_x / units_x, span_y / units_y
        return (min(x1, x2) * sx - ox, min(y1, y2) * sy - oy, max(x1, x2) * sx - ox, max(y1, y2) * sy - oy)

    def from_pixels(self, box: tuple[float, float, float, float], width: int, height: int) -> list[float | int]:
        """An ``xyxy`` pixel box written in this convention's numbers and order, as the RF100-VL
        authors wrote few-shot answers: whole units (truncated) except the fractions of
        ``normalized`` and ``square``."""
        (span_x, span_y), (units_x, units_y), (ox, oy) = self.frame(width, height)
        x1, y1, x2, y2 = box
        scaled = [(x1 + ox) * units_x / span_x, (y1 + oy) * units_y / span_y,
                  (x2 + ox) * units_x / span_x, (y2 + oy) * units_y / span_y]
        numbers: list[float | int] = (
            [round(v, 4) for v in scaled] if self.name in ("normalized", "square") else [int(v) for v in scaled]
        )
        if self.name == "gemini":
            return [numbers[1], numbers[0], numbers[3], numbers[2]]
        return numbers
