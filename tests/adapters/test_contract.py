"""One contract, checked on every registered adapter (the shared tester): output types, boxes in
pixels of the image given, one answer per image in the order given, batches of 1 and 3 that
agree, an empty class list refused, and the ``:tiny`` variant built offline. Tests of one
adapter (``test_owl.py``, ...) keep only what is specific to that model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pytest_rf100vl.adapters import Adapter, Detections, DetectionTask, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.registry import BUILTIN, create

CLASSES = ["red square", "blue circle"]
SIZES = [(160, 96), (96, 160), (128, 128)]
"""Three images of different shapes: boxes must be in each one's own pixels."""
EXTERNAL = {"oracle", "predictions"}
"""Adapters that answer from the task or a file rather than a model: no ``:tiny`` variant."""


def images() -> list[ImageItem]:
    rng = np.random.default_rng(0)
    return [
        ImageItem(Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)), i, f"{i}.png")
        for i, (w, h) in enumerate(SIZES)
    ]


def truth() -> dict[int, Detections]:
    """A box per class in each image, in that image's pixels."""
    return {
        i: Detections(np.array([[1.0, 2.0, w / 2, h / 2], [w / 4, h / 4, w - 1.0, h - 1.0]]), np.ones(2), np.arange(2))
        for i, (w, h) in enumerate(SIZES)
    }


def build(name: str, tmp_path: Path) -> Adapter:
    """The adapter ``name`` as a smoke run builds it (tiny model offline, or its own inputs)."""
    if name == "predictions":
        records = [{"image_id": i, "category_id": 11 + label, "bbox": [x0, y0, x1 - x0, y1 - y0], "score": 0.9}
                   for i, detections in truth().items()
                   for (x0, y0, x1, y1), label in zip(detections.boxes.tolist(), detections.labels.tolist())]
        path = tmp_path / "contract.json"
        path.write_text(json.dumps(records), encoding="utf-8")
        return create(f"predictions:{path}")
    if name == "oracle":
        return create("oracle")
    return create(f"{name}:tiny", device="cpu")


def task(classes: list[str] = CLASSES) -> DetectionTask:
    return DetectionTask("contract", classes, category_ids=(11, 12), ground_truth=truth(),
                         image_ids=tuple(range(len(SIZES))))


@pytest.fixture(scope="module", params=sorted(BUILTIN))
def adapter(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Adapter:
    built = build(request.param, tmp_path_factory.mktemp("contract"))
    yield built
    built.close()


def test_the_tiny_variant_builds_offline_and_says_it_is_a_smoke_run(adapter: Adapter) -> None:
    described = adapter.describe()
    assert described["model"] == adapter.name
    if adapter.name not in EXTERNAL:
        assert adapter.checkpoint == "tiny" and described["smoke"] is True
        assert described["revision"]  # a content hash of the built weights: results say exactly what ran


def test_an_empty_class_list_is_refused(adapter: Adapter) -> None:
    if "rf100vl" not in adapter.tasks:
        pytest.skip(f"{adapter.name} answers no detection task")
    with pytest.raises(ValueError, match="no classes"):
        adapter.set_task(task(classes=[]))


def test_detections_are_well_formed_pixels_in_order_and_batch_independent(adapter: Adapter) -> None:
    if "rf100vl" not in adapter.tasks:
        pytest.skip(f"{adapter.name} answers no detection task")
    adapter.set_task(task())
    items = images()
    batched = adapter.predict(items)
    assert isinstance(batched, list) and len(batched) == len(items)
    for item, detections in zip(items, batched):
        assert isinstance(detections, Detections)
        detections.check(len(CLASSES))
        width, height = item.image.size
        finite = np.asarray(detections.boxes)[np.isfinite(detections.boxes).all(axis=1)]
        # pixels of this image: never normalised to [0, 1] nor in another image's frame
        assert np.all(finite >= -width) and np.all(finite[:, [0, 2]] <= 2 * width)
        assert np.all(finite[:, [1, 3]] <= 2 * height)
    reversed_batch = adapter.predict(items[::-1])[::-1]
    singles = [adapter.predict([item])[0] for item in items]
    for one, two, alone in zip(batched, reversed_batch, singles):
        np.testing.assert_allclose(one.boxes, two.boxes, atol=1e-3)
        np.testing.assert_allclose(one.scores, two.scores, atol=1e-4)
        np.testing.assert_array_equal(one.labels, two.labels)
        assert len(alone.scores) == len(alone.labels) == len(alone.boxes)


def test_known_answers_come_back_exactly_in_pixels(adapter: Adapter) -> None:
    """Adapters that answer from the task or a file return it unchanged, in the image's pixels."""
    if adapter.name not in EXTERNAL:
        pytest.skip("a model's answers are not known in advance")
    adapter.set_task(task())
    for detections, expected in zip(adapter.predict(images()), truth().values()):
        np.testing.assert_allclose(detections.boxes, expected.boxes)
        np.testing.assert_array_equal(detections.labels, expected.labels)


def test_grounding_answers_one_per_mosaic_in_order(adapter: Adapter) -> None:
    if "uouo" not in adapter.tasks:
        pytest.skip(f"{adapter.name} answers no grounding task")
    if adapter.needs_ground_truth:
        adapter.set_task(task())
    items = images()
    queries = [GroundingQuery(CLASSES[i % 2], f"Where is the {CLASSES[i % 2]}?", "Which quadrant?")
               for i in range(len(items))]
    answers = adapter.ground(items, queries)
    assert len(answers) == len(items) and all(isinstance(answer, GroundingAnswer) for answer in answers)
    for item, answer in zip(items, answers):
        if answer.box is not None:
            assert len(answer.box) == 4 and all(np.isfinite(answer.box))
            assert max(answer.box) <= 2 * max(item.image.size)
