"""A split as training samples: decoded RGB images with their boxes in pixels (``xyxy``) and
class indices, the form every recipe starts from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, overload

import numpy as np
from PIL import Image

from rf100vl_hf.boxes import xywh_to_xyxy
from rf100vl_hf.images import open_rgb

if TYPE_CHECKING:
    import datasets


@dataclass(frozen=True)
class Sample:
    """One annotated image."""

    image: Image.Image  # RGB, the displayed frame
    boxes: np.ndarray  # (N, 4) xyxy pixels
    labels: np.ndarray  # (N,) class indices
    image_id: int = -1
    file_name: str = ""


class Samples(Sequence[Sample]):
    """A prepared split's images as samples, decoded one at a time when read (a full train
    split does not fit in memory decoded); ``relabelled`` gives some images other boxes."""

    def __init__(self, dataset: "datasets.Dataset", relabelled: dict[int, tuple[np.ndarray, np.ndarray]] | None = None):
        import datasets

        self._rows = dataset.select_columns(["image", "image_id", "file_name", "objects"]).cast_column(
            "image", datasets.Image(decode=False))
        self._relabelled = relabelled or {}

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Sample: ...
    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...
    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = self._rows[index]
        sample = Sample(
            image=open_rgb(row["image"]["bytes"]),
            boxes=xywh_to_xyxy(np.asarray(row["objects"]["bbox"], dtype=np.float64).reshape(-1, 4)),
            labels=np.asarray(row["objects"]["category"], dtype=np.int64),
            image_id=int(row["image_id"]),
            file_name=row["file_name"],
        )
        if index in self._relabelled:
            boxes, labels = self._relabelled[index]
            sample = replace(sample, boxes=np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
                             labels=np.asarray(labels, dtype=np.int64))
        return sample

    @property
    def n_boxes(self) -> int:
        """The boxes of the split (a relabelled image's new ones), read without decoding an image:
        a split with none has nothing to train on."""
        counts = [len(objects["bbox"]) for objects in self._rows["objects"]]
        for index, (boxes, _) in self._relabelled.items():
            counts[index] = len(np.asarray(boxes).reshape(-1, 4))
        return sum(counts)

    def relabelled(self, labels: dict[int, tuple[np.ndarray, np.ndarray]]) -> "Samples":
        """The same images, those at the given positions with the given boxes and labels (pseudo-labels)."""
        copy = Samples.__new__(Samples)
        copy._rows, copy._relabelled = self._rows, {**self._relabelled, **labels}
        return copy


def unlabelled(train: "datasets.Dataset", labelled: "datasets.Dataset") -> "datasets.Dataset":
    """The images of ``train`` that ``labelled`` (a split drawn from it) does not hold, by file
    name: what a semi-supervised recipe may only pseudo-label."""
    taken = set(labelled["file_name"])
    return train.filter(lambda name: name not in taken, input_columns="file_name")


def normalized_targets(sample: Sample, size: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The boxes as DETR-family models are trained on them: ``cxcywh`` in fractions of the image
    (of ``size`` = (width, height) when given), with zero-area boxes left out (a degenerate box has
    no extent to regress: pycocotools still scores them, training cannot use them)."""
    width, height = size or sample.image.size
    boxes = np.asarray(sample.boxes, dtype=np.float64).reshape(-1, 4)
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    boxes = boxes[keep]
    cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2 / width, (boxes[:, 1] + boxes[:, 3]) / 2 / height
    w, h = (boxes[:, 2] - boxes[:, 0]) / width, (boxes[:, 3] - boxes[:, 1]) / height
    return np.clip(np.stack([cx, cy, w, h], axis=1), 0.0, 1.0).astype(np.float32), sample.labels[keep]
