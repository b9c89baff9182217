"""What the closed-set DETRs (RT-DETRv2, D-FINE, DEIMv2, LW-DETR, RF-DETR) add to the shared
contract: their detections are transformers' own post-processing, in pixels of images of any
shape; a head for other classes is new, seeded, and the only thing that is; the federated mask
reaches every classification logit the loss sees (without turning LW-DETR's and RF-DETR's loss
into NaN); an older transformers is an error naming the version to install."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.training.federated import FILL, FederatedMask
from rf100vl_hf.training.samples import Sample

from pytest_rf100vl.adapters.base import DetectionTask, ImageItem
from pytest_rf100vl.adapters.closed_set_detr import ClosedSetDetr
from pytest_rf100vl.adapters.registry import adapter_class, create

NAMES = ("rt-detrv2", "d-fine", "deimv2", "lw-detr", "rf-detr")
SINCE = {"d-fine": "5.0.0", "deimv2": "5.7.0", "lw-detr": "5.0.0", "rf-detr": "5.9.0"}
"""The transformers version each new adapter needs (checked against the published wheels)."""
SIZES = [(160, 96), (96, 160), (130, 70)]


@pytest.fixture(scope="module", params=NAMES)
def detr(request: pytest.FixtureRequest) -> Iterator[ClosedSetDetr]:
    adapter = create(f"{request.param}:tiny", device="cpu")
    assert isinstance(adapter, ClosedSetDetr)
    yield adapter
    adapter.close()


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for w, h in SIZES]


def test_detections_are_transformers_post_processing_in_pixels_of_each_image(detr: ClosedSetDetr) -> None:
    detr.set_task(DetectionTask("shapes", ["square", "disc"]))
    images = _images()
    post = detr.processor.post_process_object_detection
    top_k = {"top_k": detr.options["max_detections"]} if "top_k" in inspect.signature(post).parameters else {}
    with torch.inference_mode():
        outputs = detr.outputs(detr.inputs(images))
        ours = detr.detections(outputs, images)
        theirs = post(outputs, threshold=0.0, target_sizes=[(image.height, image.width) for image in images], **top_k)
    for mine, reference in zip(ours, theirs):
        count = len(reference["scores"])  # RT-DETR's processor keeps as many as there are queries; ours keep more
        assert count >= detr.model.config.num_queries and len(mine.scores) >= count
        np.testing.assert_allclose(mine.scores[:count], reference["scores"].numpy(), rtol=1e-6)
        np.testing.assert_array_equal(mine.labels[:count], reference["labels"].numpy())
        np.testing.assert_allclose(mine.boxes[:count], reference["boxes"].numpy(), atol=1e-3)


def test_a_head_for_other_classes_is_new_seeded_and_the_only_change(detr: ClosedSetDetr) -> None:
    detr.restore_pretrained()
    checkpoint = {name: tensor.clone() for name, tensor in detr.model.state_dict().items()}
    assert not detr.fresh_head
    classes = ["red", "green", "blue"]
    detr.set_task(DetectionTask("colours", classes))
    config, state = detr.model.config, detr.model.state_dict()
    assert config.num_labels == 3 and config.id2label == dict(enumerate(classes)) and detr.fresh_head and detr.is_smoke
    assert [head.out_features for head in detr.class_head_modules()] == [3] * len(detr.class_head_modules())
    resized = {name for name, tensor in state.items() if tensor.shape != checkpoint[name].shape}
    changed = resized | {name for name, tensor in state.items() if name not in resized
                         and not torch.equal(tensor, checkpoint[name])}
    assert resized and changed == resized  # the head (and whatever is sized by the classes) is new; the rest loaded
    first = {name: tensor.clone() for name, tensor in state.items()}
    detr.set_task(DetectionTask("colours", classes[:2]))
    detr.set_task(DetectionTask("colours", classes))
    assert all(torch.equal(first[name], tensor) for name, tensor in detr.model.state_dict().items())  # seeded
    (found,) = detr.predict([ImageItem(_images()[0], 0, "0.png")])
    assert set(found.labels.tolist()) <= {0, 1, 2}


def _batch() -> list[Sample]:
    """Two images annotated for class 0 only: classes 1 and 2 are unknown there, not negative."""
    return [Sample(Image.new("RGB", (64, 48), (200, 30, 30)), np.array([[10.0, 10.0, 40.0, 40.0]]), np.array([0])),
            Sample(Image.new("RGB", (48, 64), (30, 30, 200)), np.array([[5.0, 5.0, 30.0, 50.0]]), np.array([0]))]


def _class_row_gradients(detr: ClosedSetDetr, fill: float | None) -> tuple[float, list[float], list[float]]:
    """The loss of a batch annotated for class 0 only, and the largest gradient of the rows of
    every three-output linear layer (every classification head, hooked or not) for classes 1-2
    and for class 0; ``fill`` ``None``: no mask."""
    detr.model.train()
    detr.model.zero_grad()
    mask = FederatedMask(fill if fill is not None else FILL)
    handles = mask.attach(detr.class_head_modules()) if fill is not None else []
    mask.set([sample.labels.tolist() for sample in _batch()], 3)
    try:
        torch.manual_seed(0)
        loss = detr.loss(_batch()).loss
        loss.backward()
        value = float(loss.detach())
    finally:
        for handle in handles:
            handle.remove()
        detr.model.eval()
    heads = [m for m in detr.model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 3]
    assert heads
    return (value, [float(head.weight.grad[1:].abs().max()) for head in heads],
            [float(head.weight.grad[0].abs().max()) for head in heads])


def test_the_federated_mask_reaches_every_classification_logit_of_the_loss(detr: ClosedSetDetr) -> None:
    detr.set_task(DetectionTask("colours", ["red", "green", "blue"]))
    loss, unknown, known = _class_row_gradients(detr, None)
    assert np.isfinite(loss) and min(unknown) > 0  # unmasked, the unannotated classes are negatives
    loss, unknown, known = _class_row_gradients(detr, detr.federated_fill)
    assert np.isfinite(loss) and max(unknown) == 0.0 and max(known) > 0
    if detr.federated_fill != FILL:  # LW-DETR, RF-DETR: their IoU-aware BCE takes log(sigmoid) itself
        assert np.isnan(_class_row_gradients(detr, FILL)[0])


@pytest.mark.parametrize(("name", "since"), sorted(SINCE.items()))
def test_an_older_transformers_is_an_error_naming_the_version_that_has_the_model(
    monkeypatch: pytest.MonkeyPatch, name: str, since: str
) -> None:
    cls = adapter_class(name)  # imported with the real transformers, as it would be
    older = types.ModuleType("transformers")
    older.__version__ = "4.99.0"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", older)
    with pytest.raises(ImportError, match=(
            rf"adapter '{name}' needs transformers\.{cls.architecture}, which transformers 4\.99\.0 lacks: it "
            rf"needs transformers {since} or later \(pip install -U 'transformers>={since}'\)")):
        create(f"{name}:tiny")


@pytest.mark.parametrize("name", NAMES)
def test_every_regime_fine_tunes_by_detr_finetune_and_stac_trains_a_student_as_long(name: str) -> None:
    cls = adapter_class(name)
    assert set(cls.recipes) == {"detr-finetune", "stac"} and set(cls.default_recipes.values()) == {"detr-finetune"}
    assert cls.recipes["stac"].extra == {"student_epochs": cls.recipes["detr-finetune"].epochs}
    assert cls.recipes["stac"].hyperparameters() == {**cls.recipes["detr-finetune"].hyperparameters(),
                                                     "student_epochs": cls.recipes["detr-finetune"].epochs}
