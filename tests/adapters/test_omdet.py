"""OmDet-Turbo on its tiny random model (real timm Swin-T backbone, random weights)."""

from __future__ import annotations

import socket

import numpy as np
import pytest
import torch
from PIL import Image
from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboObjectDetectionOutput

from pytest_rf100vl.adapters import DetectionTask, ImageItem, create

from tests.adapters.reference import (
    ON_DEVICE,
    assert_same_detections,
    full_float32,
    host,
    on_device,
    reference_model,
    to_device,
)

CLASSES = ["cat", "red fox", "dog"]


def noise_items(*sizes: tuple[int, int]) -> list[ImageItem]:
    rng = np.random.default_rng(2)
    return [
        ImageItem(Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)), i, f"{i}.jpg")
        for i, (w, h) in enumerate(sizes)
    ]


@pytest.fixture(scope="module")
def omdet():
    """Built and loaded with every network connection refused: the timm backbone must be
    created from its config alone, with no weight download."""

    def refuse(*args, **kwargs):
        raise AssertionError("network access while building or loading the tiny model")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        adapter = create("omdet-turbo:tiny")
    yield adapter
    adapter.close()


def test_names_give_well_formed_detections(omdet) -> None:
    omdet.set_task(DetectionTask("toy", CLASSES))
    batch = noise_items((200, 100), (64, 160), (1, 1), (1, 300))
    out = omdet.predict(batch)
    assert len(out) == len(batch)
    for detections in out:
        detections.check(len(CLASSES))
        assert len(detections.scores) > 0
        assert np.all(detections.scores > omdet.options["score_threshold"])


def fixed_output(coords: torch.Tensor, logits: torch.Tensor):
    """A forward that ignores its input and returns these decoder outputs."""

    def forward(**inputs):
        structure = inputs["classes_structure"]
        return OmDetTurboObjectDetectionOutput(
            decoder_coord_logits=coords.expand(len(structure), -1, -1),
            decoder_class_logits=logits.expand(len(structure), -1, -1),
            classes_structure=structure,
        )

    return forward


def test_boxes_are_in_pixels_and_broken_queries_are_dropped(omdet, monkeypatch: pytest.MonkeyPatch) -> None:
    coords = torch.tensor([[[0.5, 0.5, 0.5, 0.5], [0.25, 0.75, 0.5, 0.5], [float("nan"), 0.5, 0.1, 0.1]]])
    logits = torch.tensor([[[4.0, -9.0, -9.0], [-9.0, -9.0, 2.0], [9.0, 9.0, 9.0]]])
    monkeypatch.setattr(omdet.model, "forward", fixed_output(coords, logits))
    omdet.set_task(DetectionTask("toy", CLASSES))
    (detections,) = omdet.predict(noise_items((200, 100)))
    order = np.argsort(-detections.scores)
    np.testing.assert_array_equal(detections.labels[order], [0, 2])
    np.testing.assert_allclose(detections.boxes[order], [[50, 25, 150, 75], [0, 50, 100, 100]], atol=1e-4)
    np.testing.assert_allclose(detections.scores[order], torch.sigmoid(torch.tensor([4.0, 2.0])).numpy(), rtol=1e-6)


def test_class_nms_off_keeps_overlapping_boxes_of_a_class(omdet, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two queries with the same box and class: NMS keeps the better one; ``class_nms=false``
    (the ``rf-scripts`` protocol) keeps both."""
    coords = torch.tensor([[[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]])
    logits = torch.tensor([[[4.0, -9.0, -9.0], [3.0, -9.0, -9.0]]])
    monkeypatch.setattr(omdet.model, "forward", fixed_output(coords, logits))
    omdet.set_task(DetectionTask("toy", CLASSES))
    (kept,) = omdet.predict(noise_items((200, 100)))
    monkeypatch.setitem(omdet.options, "class_nms", False)
    (every,) = omdet.predict(noise_items((200, 100)))
    np.testing.assert_allclose(kept.scores, torch.sigmoid(torch.tensor([4.0])).numpy(), rtol=1e-6)
    np.testing.assert_allclose(np.sort(every.scores), torch.sigmoid(torch.tensor([3.0, 4.0])).numpy(), rtol=1e-6)


def test_only_names_mode_is_supported(omdet) -> None:
    with pytest.raises(ValueError, match="does not support prompt mode 'instructions'"):
        omdet.set_task(DetectionTask("toy", CLASSES, prompt="instructions"))


def test_runs_in_bfloat16() -> None:
    adapter = create("omdet-turbo:tiny", dtype="bfloat16")
    assert adapter.model.dtype == torch.bfloat16
    adapter.set_task(DetectionTask("toy", CLASSES))
    (detections,) = adapter.predict(noise_items((90, 60)))
    detections.check(len(CLASSES))


@pytest.mark.parametrize("device", ON_DEVICE)
def test_preprocessing_on_device_gives_transformers_own_detections(omdet, device: str) -> None:
    """Against transformers' own processor (PIL images, CPU), the model and the processor's
    post-processing on the adapter's device."""
    adapter = on_device(omdet, device)
    adapter.set_task(DetectionTask("toy", CLASSES))
    items = noise_items((300, 200), (130, 410))
    images = [item.image for item in items]
    model, processor = reference_model(adapter)
    inputs = processor(images=images, text=[CLASSES] * len(images), return_tensors="pt")
    with full_float32(), torch.inference_mode():
        outputs = model(**to_device({key: value for key, value in inputs.items() if key != "pixel_mask"},
                                    model.device))
        found = adapter.predict(items)
    results = processor.post_process_grounded_object_detection(
        outputs,
        threshold=adapter.options["score_threshold"],
        nms_threshold=adapter.options["nms_iou"],
        target_sizes=[(image.height, image.width) for image in images],
    )
    assert_same_detections(found, [host(result) for result in results])
