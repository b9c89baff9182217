"""The CLIP quadrant baseline: the tiny open_clip model end to end, and the cell geometry
with encoders that see colour, so the right answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.metrics.grounding import QUADRANTS, quadrant_of
from rf100vl_hf.uouo.prompts import box_prompt, quadrant_prompt

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.clip_quadrant import ClipQuadrantAdapter, cells
from pytest_rf100vl.adapters.registry import create


@pytest.fixture(scope="module")
def clip() -> ClipQuadrantAdapter:
    adapter = create("clip-quadrant:tiny")
    assert isinstance(adapter, ClipQuadrantAdapter)
    return adapter


def query(name: str) -> GroundingQuery:
    return GroundingQuery(name, box_prompt(name), quadrant_prompt(name))


def mosaic(size: tuple[int, int], red_cell: int) -> ImageItem:
    """Grey halves of an image with one cell painted red."""
    image = Image.new("RGB", size, (128, 128, 128))
    x1, y1, x2, y2 = (round(v) for v in cells(*size)[red_cell])
    image.paste((255, 0, 0), (x1, y1, x2, y2))
    return ImageItem(image, image_id=red_cell, file_name=f"{red_cell}.png")


def test_tiny_model_answers_a_quadrant_and_its_cell(clip: ClipQuadrantAdapter) -> None:
    rng = np.random.default_rng(0)
    batch = [
        ImageItem(Image.fromarray(rng.integers(0, 255, (800, 800, 3), dtype=np.uint8)), i, f"{i}.png") for i in range(2)
    ]
    answers = clip.ground(batch, [query("resistor"), query("arduino nano")])
    assert len(answers) == 2
    for answer in answers:
        assert answer.quadrant in QUADRANTS
        assert answer.box == cells(800, 800)[QUADRANTS.index(answer.quadrant)]
        assert quadrant_of(answer.box, 800, 800) == answer.quadrant  # the scorer agrees with the word
        assert answer.box[2] - answer.box[0] == answer.box[3] - answer.box[1] == 400
    assert clip.describe()["smoke"] is True and clip.revision == "random-init-seed0"


@pytest.mark.parametrize("size", [(800, 800), (600, 300)])
def test_the_cell_most_like_the_text_wins(
    clip: ClipQuadrantAdapter, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """Image features = mean colour, text feature = red: the red cell must be the answer."""

    def encode_image(pixels: torch.Tensor, normalize: bool = True) -> torch.Tensor:
        return torch.nn.functional.normalize(pixels.mean(dim=(2, 3)), dim=-1)

    def encode_text(tokens: torch.Tensor, normalize: bool = True) -> torch.Tensor:
        return torch.tensor([[1.0, -1.0, -1.0]]).repeat(len(tokens), 1)

    monkeypatch.setattr(clip.model, "encode_image", encode_image)
    monkeypatch.setattr(clip.model, "encode_text", encode_text)
    batch = [mosaic(size, cell) for cell in range(4)]
    answers = clip.ground(batch, [query("red square")] * 4)
    assert [answer.quadrant for answer in answers] == list(QUADRANTS)
    assert [answer.box for answer in answers] == cells(*size)
    assert answers[0].raw["similarity"].startswith("top-left=")


def test_it_does_not_detect(clip: ClipQuadrantAdapter) -> None:
    clip.set_task(DetectionTask(dataset="d", classes=["cat"]))
    with pytest.raises(NotImplementedError, match="UOUO quadrant questions only"):
        clip.predict([ImageItem(Image.new("RGB", (8, 8)), 0, "x.png")])


def test_a_checkpoint_without_weights_is_refused() -> None:
    with pytest.raises(ValueError, match="names no weights: write MODEL@TAG .*laion2b_s34b_b79k"):
        create("clip-quadrant:ViT-B-32")
    with pytest.raises(TypeError, match="unknown option"):
        create("clip-quadrant:tiny", per_class=True)
