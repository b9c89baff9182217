"""What the detector adapters' tests share to check that preprocessing on the model's device
moves no score: the devices to run on, and the comparison with transformers' own path.

The reference is transformers' own path on the same device as the adapter: its processor on
the CPU (PIL images), the model's full forward and the processor's post-processing. A CUDA
run is not compared with a CPU one: cuDNN convolutions use TF32 by default and reductions run
in another order, which moves scores by up to about 1e-2 (``docs/scale.md``), while the claim
under test is that moving the preprocessing onto the device moves nothing. TF32 is off inside
these comparisons (:func:`full_float32`), so that both paths are plain float32 there too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch

from pytest_rf100vl.adapters.base import Detections

ON_DEVICE = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
"""Where the adapter and its reference run."""


def on_device(adapter, device: str):
    """``adapter`` itself on CPU, else the same tiny model loaded on ``device``."""
    from pytest_rf100vl.adapters import create

    return adapter if device == "cpu" else create(f"{adapter.name}:tiny", device=device)


@contextmanager
def full_float32() -> Iterator[None]:
    """Float32 matrix products and convolutions without TF32 on CUDA (no effect elsewhere)."""
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    before = matmul.fp32_precision, conv.fp32_precision
    matmul.fp32_precision = conv.fp32_precision = "ieee"
    try:
        yield
    finally:
        matmul.fp32_precision, conv.fp32_precision = before


def reference_model(adapter):
    """The adapter's model as a float32 model on the adapter's device (itself when it is one),
    and a fresh copy of transformers' own processor for it."""
    from transformers import AutoProcessor

    model = adapter.model
    if model.dtype != torch.float32:
        model = type(model).from_pretrained(adapter.source).to(adapter.torch_device).eval()
    return model, AutoProcessor.from_pretrained(adapter.source)


def to_device(inputs: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The processor's outputs with every tensor on ``device``."""
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in inputs.items()}


def host(result: dict[str, torch.Tensor], keep: Any = slice(None)) -> dict[str, np.ndarray]:
    """A post-processing result's ``boxes``, ``scores`` and ``labels`` (rows ``keep``) as numpy arrays."""
    return {key: result[key][keep].cpu().numpy() for key in ("boxes", "scores", "labels")}


def assert_same_detections(found: list[Detections], expected: list[dict]) -> None:
    """Equal detections per image, in score order: scores to 1e-4, boxes to 1e-4 of their
    pixel coordinates, labels exactly. ``expected`` holds numpy ``boxes``, ``scores``, ``labels``."""
    for detections, reference in zip(found, expected, strict=True):
        assert len(detections.scores) == len(reference["scores"]) > 0
        mine = np.argsort(-detections.scores, kind="stable")
        theirs = np.argsort(-np.asarray(reference["scores"]), kind="stable")
        np.testing.assert_allclose(detections.scores[mine], np.asarray(reference["scores"])[theirs], atol=1e-4)
        np.testing.assert_allclose(detections.boxes[mine], np.asarray(reference["boxes"])[theirs], rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(detections.labels[mine], np.asarray(reference["labels"])[theirs])
