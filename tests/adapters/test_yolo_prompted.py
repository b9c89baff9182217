"""YOLO-E and YOLO-World through ultralytics (the optional ``yolo`` extra): the classes as text
prompts, and for YOLO-E the few-shot boxes as visual prompts (each class's embedding averaged
over the few-shot images that have its boxes, a class without any keeping its text)."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_rf100vl.adapters import DetectionTask, FewShotExample, ImageItem
from pytest_rf100vl.adapters.registry import create

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ultralytics") is None,
                                reason="the optional yolo extra (ultralytics) is not installed")

CLASSES = ["red square", "blue circle", "green ring"]


def image(seed: int, size: tuple[int, int] = (160, 96)) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))


def example(seed: int, labels: list[int]) -> FewShotExample:
    boxes = np.array([[10.0 + 20 * i, 8.0, 60.0 + 20 * i, 70.0] for i in range(len(labels))]).reshape(-1, 4)
    return FewShotExample(image(seed), boxes, np.array(labels, dtype=np.int64))


@pytest.fixture(scope="module")
def yoloe() -> Any:
    return create("yoloe:tiny", imgsz=64)


def test_text_prompts_are_one_embedding_per_name_and_key_the_answers(yoloe: Any) -> None:
    adapter = yoloe
    adapter.set_task(DetectionTask("shapes", CLASSES))
    prompts = adapter.model.model.pe
    assert prompts.shape == (1, 3, adapter.model.model.model[-1].embed)
    assert torch.allclose(prompts, adapter.text_embeddings(CLASSES))
    assert not torch.allclose(prompts[0, 0], prompts[0, 1])
    assert adapter.answer_key_parts() == ("rf100vl", "3 classes", *CLASSES)
    assert adapter.pair_columns() == {} and adapter.describe()["smoke"] is True
    assert adapter.revision == "ultralytics:yoloe-11n.yaml"


def test_visual_prompts_replace_the_text_of_each_class_with_few_shot_boxes(yoloe: Any) -> None:
    adapter = yoloe
    fewshot = (example(1, [0, 1, 0]), example(2, [0]), example(3, []))
    adapter.set_task(DetectionTask("shapes", CLASSES, prompt="fewshot", fewshot=fewshot))
    prompts, text = adapter.model.model.pe[0].clone(), adapter.text_embeddings(CLASSES)[0]
    assert torch.allclose(prompts[2], text[2])  # no box of green ring: its name
    assert not torch.allclose(prompts[0], text[0]) and not torch.allclose(prompts[1], text[1])
    assert torch.allclose(prompts[:2].norm(dim=-1), torch.ones(2), atol=1e-5)
    assert adapter.pair_columns() == {"text_fallback_classes": 1}
    keyed = adapter.answer_key_parts()
    assert len(keyed) == 2 + 3 + 3 and keyed[-1].endswith(":[]:[]")
    (detections,) = adapter.predict([ImageItem(image(9), 0, "0.png")])
    assert detections.boxes.shape[1] == 4
    adapter.set_task(DetectionTask("shapes", CLASSES, prompt="fewshot", fewshot=fewshot[:1]))
    only_first = adapter.model.model.pe[0]  # the class's mean moves with the images that show it
    assert torch.allclose(only_first[1], prompts[1], atol=1e-5) and not torch.allclose(only_first[0], prompts[0])


def test_yolo_world_is_prompted_by_the_names_and_takes_no_visual_prompts() -> None:
    adapter = create("yolo-world:tiny", imgsz=64)
    adapter.set_task(DetectionTask("shapes", CLASSES))
    assert adapter.model.model.txt_feats.shape == (1, 3, 512) and adapter.model.model.model[-1].nc == 3
    with pytest.raises(ValueError, match="adapter 'yolo-world' does not support prompt mode 'fewshot'"):
        adapter.set_task(DetectionTask("shapes", CLASSES, prompt="fewshot", fewshot=(example(1, [0]),)))
