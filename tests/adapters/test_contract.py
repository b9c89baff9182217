"""One contract, checked on every registered adapter (the shared tester): output types, boxes in
pixels of the image given, one answer per image in the order given, batches of 1 and 3 that
agree, an empty class list refused, and the ``:tiny`` variant built offline. Tests of one
adapter (``test_owl.py``, ...) keep only what is specific to that model."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pytest_rf100vl.adapters import Adapter, Detections, DetectionTask, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.registry import BUILTIN, create

from tests.support.model_servers import Received, serve_gemini, serve_openai

CLASSES = ["red square", "blue circle"]
SIZES = [(160, 96), (96, 160), (128, 128)]
"""Three images of different shapes: boxes must be in each one's own pixels."""
EXTERNAL = {"oracle", "predictions"}
"""Adapters that answer from the task or a file rather than a model: no ``:tiny`` variant."""
SERVED = {"openai": (serve_openai, "normalized"), "gemini": (serve_gemini, "gemini")}
"""Adapters of models behind a server, built against a stand-in that answers each image's
truth in the adapter's convention (no ``:tiny`` variant either)."""
OPTIONAL = {"rfdetr": "rfdetr"}
"""Adapters on an extra that the ``test`` extra does not bring -> the package it needs."""


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


def written(convention: str, box: list[float], size: tuple[int, int]) -> list[float]:
    """A pixel box in the numbers of ``convention`` (normalized, or Gemini's y-first 0..1000)."""
    (x1, y1, x2, y2), (w, h) = box, size
    if convention == "gemini":
        return [y1 * 1000 / h, x1 * 1000 / w, y2 * 1000 / h, x2 * 1000 / w]
    return [x1 / w, y1 / h, x2 / w, y2 / h]


def stand_in_answer(convention: str):
    """Each image's truth (found by its size), and a box and a quadrant for UOUO questions."""
    by_size = {size: truth()[i] for i, size in enumerate(SIZES)}

    def answer(received: Received) -> str:
        size = received.image.size
        detections = by_size[size]
        if "quadrant" in received.question.lower():
            return "top-left"
        if received.question.startswith("Where is"):
            return json.dumps(written("qwen3" if convention == "gemini" else convention, detections.boxes[0].tolist(),
                                      size))
        key = "box_2d" if convention == "gemini" else "bbox_2d"
        return json.dumps([{key: written(convention, box.tolist(), size), "label": CLASSES[label]}
                           for box, label in zip(detections.boxes, detections.labels)])

    return answer


def build(name: str, tmp_path: Path, stack: ExitStack) -> Adapter:
    """The adapter ``name`` as a smoke run builds it (tiny model offline, its own inputs, or a stand-in server)."""
    if name in SERVED:
        serve, convention = SERVED[name]
        server = stack.enter_context(serve(answer=stand_in_answer(convention)))
        family = "generic" if name == "openai" else "gemini"
        return create(f"{name}:stand-in", base_url=server.url, family=family, retry_base_delay=0.001)
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
def adapter(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Adapter]:
    package = OPTIONAL.get(request.param)
    if package is not None and importlib.util.find_spec(package) is None:
        pytest.skip(f"{request.param} needs the optional package {package}, which is not installed")
    with ExitStack() as stack:
        built = build(request.param, tmp_path_factory.mktemp("contract"), stack)
        yield built
        built.close()


def test_the_tiny_variant_builds_offline_and_says_it_is_a_smoke_run(adapter: Adapter) -> None:
    described = adapter.describe()
    assert described["model"] == adapter.name
    if adapter.name in SERVED:  # a real model behind a server: its scores mean something
        assert adapter.checkpoint == "stand-in" and described["smoke"] is False
        assert described["base_url"].startswith("http://127.0.0.1:")
    elif adapter.name not in EXTERNAL:
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
    """Adapters that answer from the task, a file or a stand-in's truth return it, in the image's pixels."""
    if adapter.name not in EXTERNAL | set(SERVED):
        pytest.skip("a model's answers are not known in advance")
    adapter.set_task(task())
    for detections, expected in zip(adapter.predict(images()), truth().values()):
        np.testing.assert_allclose(detections.boxes, expected.boxes, atol=1e-9)
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


def test_the_identity_known_before_building_is_the_one_the_model_records(adapter: Adapter) -> None:
    """A pair is reused on the :class:`ModelInfo` its class plans without building the model:
    a built-in whose planned revision differs from the one it records would never be reused."""
    if "rf100vl" in adapter.tasks:
        adapter.set_task(task())
    planned = type(adapter).planned_info(adapter.checkpoint, {}, "contract", "test")
    built = adapter.info
    assert (planned.name, planned.checkpoint, planned.revision) == (built.name, built.checkpoint, built.revision)
