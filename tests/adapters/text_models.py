"""What the tests of the text-answering adapters share: images, a scripted ``generate``,
and the end-to-end check of a tiny model."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.text_answers import ChatAdapter

WIDE = (300, 200)  # a non-square image, so x and y scales differ


def image_item(size: tuple[int, int], seed: int = 0) -> ImageItem:
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    return ImageItem(Image.fromarray(pixels), image_id=seed, file_name=f"{seed}.jpg")


def script(adapter: ChatAdapter, monkeypatch: pytest.MonkeyPatch, answer: Callable[[str], str]) -> list[str]:
    """Make a decoder-only model "answer" ``answer(prompt)`` to each prompt of a batch: the
    tokens come back through the adapter's own decoding. Returns the prompts the model got."""
    tokenizer = adapter.transport.weights.processor.tokenizer
    seen: list[str] = []

    def generate(input_ids: torch.Tensor, **kwargs: object) -> torch.Tensor:
        rows = []
        for ids in input_ids:
            seen.append(tokenizer.decode(ids, skip_special_tokens=False))
            rows.append(tokenizer(answer(seen[-1]), add_special_tokens=False)["input_ids"])
        width = max(map(len, rows))
        tail = torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows], dtype=torch.long)
        return torch.cat([input_ids, tail.reshape(len(rows), width)], dim=1)

    monkeypatch.setattr(adapter.transport.weights.model, "generate", generate)
    return seen


def check_end_to_end(adapter: ChatAdapter, asked: set[str]) -> list[GroundingAnswer]:
    """A tiny model detects (every box scored 1.0, inside its image, labels in range) and
    grounds (``asked``: the questions whose raw answers it keeps) on two images of other shapes."""
    batch = [image_item(WIDE, 0), image_item((90, 120), 1)]
    adapter.set_task(DetectionTask(dataset="d", classes=["cat", "dog"]))
    detections = adapter.predict(batch)
    assert len(detections) == 2
    for item, found in zip(batch, detections):
        found.check(num_classes=2)
        assert found.boxes.shape == (len(found.scores), 4) and np.all(found.scores == 1.0)
        assert np.all(found.boxes[:, [0, 2]] <= item.image.width) and np.all(
            found.boxes[:, [1, 3]] <= item.image.height
        )
    answers = adapter.ground(batch, [GroundingQuery("cat", box_prompt("cat"), quadrant_prompt("cat"))] * 2)
    assert [set(answer.raw) for answer in answers] == [asked] * 2
    return answers
