"""``device_map="auto"``: a transformers model spread over the visible devices by accelerate
answers exactly as the same model on one device, says where it ran, and adapters that run no
transformers model refuse a device map with a clear error."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from pytest_rf100vl.adapters import DetectionTask, ImageItem, create


def test_a_device_mapped_model_answers_as_the_same_model_on_one_device() -> None:
    rng = np.random.default_rng(1)
    items = [ImageItem(Image.fromarray(rng.integers(0, 255, (96, 160, 3), dtype=np.uint8)), 0, "a.png")]
    task = DetectionTask("map", ["red square", "blue circle"])
    plain, mapped = create("owlv2:tiny"), create("owlv2:tiny", device_map="auto")
    for adapter in (plain, mapped):
        adapter.set_task(task)
    (one,), (two,) = plain.predict(items), mapped.predict(items)
    np.testing.assert_allclose(one.boxes, two.boxes, atol=1e-5)
    np.testing.assert_allclose(one.scores, two.scores, atol=1e-6)
    described = mapped.describe()
    assert described["device_map"] == "auto" and described["device"] == "cpu"
    assert plain.describe()["device_map"] is None


def test_an_adapter_without_a_transformers_model_refuses_a_device_map() -> None:
    with pytest.raises(ValueError, match="'oracle' runs no transformers model, so it cannot take a device map"):
        create("oracle", device_map="auto")
