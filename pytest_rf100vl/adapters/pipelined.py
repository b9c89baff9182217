"""Transformers detectors whose ``predict`` is three stages, the
:class:`~pytest_rf100vl.adapters.base.Pipelined` protocol, so that the runner can overlap
consecutive batches and the GPU never waits for the host (``docs/scale.md``, "Feeding the GPU").

A subclass implements the three, each on a whole batch:

- :meth:`PipelinedDetector.inputs`: the model's inputs on its device, the processor's work
  done there (pixels copied once per image size, pinned and asynchronous on CUDA);
- :meth:`PipelinedDetector.outputs`: the forward, queued on the device: nothing in it waits
  for the GPU (no ``.item()``, ``.cpu()`` or boolean mask);
- :meth:`PipelinedDetector.detections`: thresholds, NMS and boxes in pixels, read back to the
  host in one copy (:func:`~pytest_rf100vl.adapters.hf.read_back`).

Example: OWLv2 (``owl.py``) returns the preprocessed pixels, then the class logits and boxes of
every patch, then per image the boxes above its threshold after class-wise NMS.

``predict`` runs the three in a row, so a batch gets the same detections whether or not the
runner overlaps it with others. ``compile=True`` runs :meth:`~PipelinedDetector.outputs`
through ``torch.compile``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from PIL import Image

from pytest_rf100vl.adapters.base import Detections, ImageItem
from pytest_rf100vl.adapters.hf import HFDetector, pad_elongated


@dataclass(frozen=True)
class Staged:
    """A batch between two stages: its images as the model sees them (padded if elongated,
    whose sizes the boxes are scaled to) and what the last stage made of them."""

    images: list[Image.Image]
    value: Any


class PipelinedDetector(HFDetector):
    """A transformers detector run as :meth:`inputs`, :meth:`outputs`, :meth:`detections`."""

    compiles = True

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.forward: Callable[[Any], Any] = torch.compile(self.outputs) if self.compile else self.outputs

    @abstractmethod
    def inputs(self, images: list[Image.Image]) -> Any:
        """The model's inputs for these images (already padded if elongated), on its device."""

    @abstractmethod
    def outputs(self, inputs: Any) -> Any:
        """The model's raw outputs for :meth:`inputs`, queued on the device."""

    @abstractmethod
    def detections(self, outputs: Any, images: list[Image.Image]) -> list[Detections]:
        """Detections in pixels of each image, from :meth:`outputs`."""

    def detect(self, images: list[Image.Image]) -> list[Detections]:
        return self.detections(self.forward(self.inputs(images)), images)

    def prepare(self, batch: list[ImageItem]) -> Staged:
        if self.task is None:
            raise RuntimeError(f"adapter {self.name!r}: set_task must be called before prepare")
        images = [pad_elongated(item.image) for item in batch]
        with torch.inference_mode():
            return Staged(images, self.inputs(images))

    def launch(self, prepared: Staged) -> Staged:
        with torch.inference_mode():
            return Staged(prepared.images, self.forward(prepared.value))

    def collect(self, launched: Staged) -> list[Detections]:
        with torch.inference_mode():
            return self.detections(launched.value, launched.images)
