"""What the detector adapters' tests share to check that preprocessing on the model's device
moves no score: the devices to run on, and the comparison with transformers' own path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_rf100vl.adapters.base import Detections

ON_DEVICE = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]
"""Where the adapter runs; the reference always runs on CPU."""


def on_device(adapter, device: str):
    """``adapter`` itself on CPU, else the same tiny model loaded on ``device``."""
    from pytest_rf100vl.adapters import create

    return adapter if device == "cpu" else create(f"{adapter.name}:tiny", device=device)


def reference_model(adapter):
    """The adapter's model as a float32 CPU model (itself when it is one), and a fresh copy
    of transformers' own processor for it."""
    from transformers import AutoProcessor

    model = adapter.model
    if adapter.torch_device.type != "cpu" or model.dtype != torch.float32:
        model = type(model).from_pretrained(adapter.source).eval()
    return model, AutoProcessor.from_pretrained(adapter.source)


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
