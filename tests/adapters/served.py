"""What the tests of the served adapters (``openai``, ``gemini``) share: stored images, the
ground truth written in each coordinate convention by the tests' own arithmetic (never the
package's ``BoxConvention``), and the stand-in's scripted answers built from it."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable

import numpy as np
from PIL import Image

from pytest_rf100vl.adapters.base import ImageItem

from tests.support.model_servers import Received

TEST_KEY = "sk-test-6f1c0a9e-do-not-leak"
KEY_VARIABLE = "RF100VL_TEST_API_KEY"
"""The key the ``api_key`` fixture puts in the environment, and its variable."""

QWEN25_FRAMES = {(300, 200): (308, 196), (200, 300): (196, 308), (128, 128): (140, 140), (280, 140): (280, 140)}
"""Qwen2.5-VL's ``smart_resize`` of these sizes (multiples of 28, default pixel limits), worked by hand:
300/28 = 10.7 -> 11 * 28 = 308 and 200/28 = 7.1 -> 7 * 28 = 196; 128/28 = 4.6 -> 5 * 28 = 140."""

SIZES = [(300, 200), (200, 300), (128, 128)]
"""A wide, a tall and a square image."""
TRUTH = {
    (300, 200): [("cat", (75.0, 50.0, 225.0, 150.0)), ("dog", (3.5, 120.25, 60.0, 199.0))],
    (200, 300): [("dog", (10.0, 20.0, 190.0, 280.0))],
    (128, 128): [("cat", (0.0, 0.0, 64.0, 32.0)), ("cat", (64.0, 64.0, 128.0, 128.0))],
}
"""The boxes each image's stand-in answer describes, ``xyxy`` pixels, by image size."""


def stored_item(size: tuple[int, int], seed: int = 0, fmt: str = "PNG", **save: object) -> ImageItem:
    """An image as the runner hands it over: decoded RGB pixels and the file bytes as stored."""
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt, **save)
    data = buffer.getvalue()
    return ImageItem(Image.open(io.BytesIO(data)).convert("RGB"), seed, f"{seed}.{fmt.lower()}", data)


def items() -> list[ImageItem]:
    return [stored_item(size, seed) for seed, size in enumerate(SIZES)]


def qwen25_frame(size: tuple[int, int]) -> tuple[int, int]:
    """Qwen2.5-VL's resized ``(width, height)``: worked by hand for :data:`SIZES`, else
    transformers' own ``smart_resize`` with the checkpoints' limits."""
    if size in QWEN25_FRAMES:
        return QWEN25_FRAMES[size]
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    height, width = smart_resize(size[1], size[0], factor=28, min_pixels=56 * 56, max_pixels=16384 * 28 * 28)
    return width, height


def square_offsets(size: tuple[int, int]) -> tuple[int, int, int]:
    """The side of the centred square an image is padded to, and the padding left and above."""
    side = max(size)
    return side, (side - size[0]) // 2, (side - size[1]) // 2


def written(convention: str, box: tuple[float, ...], size: tuple[int, int]) -> list[float]:
    """A pixel box as a model of ``convention`` writes it (the answer's four numbers)."""
    x1, y1, x2, y2 = box
    width, height = size
    if convention == "square":
        side, left, top = square_offsets(size)
        return [(x1 + left) / side, (y1 + top) / side, (x2 + left) / side, (y2 + top) / side]
    if convention == "qwen2.5":
        frame_w, frame_h = qwen25_frame(size)
        return [x1 * frame_w / width, y1 * frame_h / height, x2 * frame_w / width, y2 * frame_h / height]
    if convention == "qwen3":
        return [x1 * 1000 / width, y1 * 1000 / height, x2 * 1000 / width, y2 * 1000 / height]
    if convention == "gemini":
        return [y1 * 1000 / height, x1 * 1000 / width, y2 * 1000 / height, x2 * 1000 / width]
    if convention == "normalized":
        return [x1 / width, y1 / height, x2 / width, y2 / height]
    assert convention == "pixels"
    return [x1, y1, x2, y2]


def read_back(convention: str, numbers: list[float], size: tuple[int, int]) -> list[float]:
    """The pixel box a model of ``convention`` meant by ``numbers`` (the inverse of :func:`written`)."""
    width, height = size
    a, b, c, d = numbers
    if convention == "square":
        side, left, top = square_offsets(size)
        return [a * side - left, b * side - top, c * side - left, d * side - top]
    if convention == "qwen2.5":
        frame_w, frame_h = qwen25_frame(size)
        return [a * width / frame_w, b * height / frame_h, c * width / frame_w, d * height / frame_h]
    if convention == "qwen3":
        return [a * width / 1000, b * height / 1000, c * width / 1000, d * height / 1000]
    if convention == "gemini":
        return [b * width / 1000, a * height / 1000, d * width / 1000, c * height / 1000]
    if convention == "normalized":
        return [a * width, b * height, c * width, d * height]
    return [a, b, c, d]


def truth_answer(convention: str, key: str = "bbox_2d", whole: bool = False) -> Callable[[Received], str]:
    """The stand-in's script: each image's :data:`TRUTH` in ``convention`` (``whole``: numbers
    truncated to integers, as models write them), found by the size of the image received."""

    def answer(received: Received) -> str:
        size = received.image.size
        boxes = []
        for label, box in TRUTH[size]:
            numbers = written(convention, box, size)
            boxes.append({key: [math.trunc(v) for v in numbers] if whole else numbers, "label": label})
        return json.dumps(boxes)

    return answer


def expected_pixels(convention: str, whole: bool, size: tuple[int, int]) -> list[list[float]]:
    """What the adapter must return for :func:`truth_answer` on an image of ``size``."""
    rows = []
    for _, box in TRUTH[size]:
        numbers = written(convention, box, size)
        rows.append(read_back(convention, [math.trunc(v) for v in numbers], size) if whole else list(box))
    return rows
