"""The few-shot and semi-supervised splits, made from a train split.

``fewshot`` follows the sampling of the RF100-VL challenge tooling (the FsDet recipe):
K *instances* per class, not K images. Classes are visited in category-id order with one
``random.Random(seed)``; for each, the images holding that class (in annotation-file order)
are drawn with ``random.sample`` and an image's boxes of that class are all taken unless
that would exceed K. Draws repeat until exactly K are taken. Two deliberate differences,
both only where the original would loop forever: when a class has fewer images than K the
target drops to the number of images (as in the original), and after ``max_rounds`` draws
without reaching the target the split keeps what it has and says so. An image keeps only
the boxes of the classes it was drawn for: the others in it are unlabelled, so the split
is federated and training or evaluating on it must not treat missing boxes as background.

``semisup`` is a seeded random fraction of the train images after sorting them by file
name, so it does not depend on directory or JSON order.
"""

from __future__ import annotations

import random
import warnings
from collections import defaultdict
from dataclasses import replace

from rf100vl_hf.rf100vl.reader import Annotation, ImageRecord


class FewShotWarning(UserWarning):
    """A class could not get exactly K instances in the generated few-shot split."""


def _renumbered(images: list[ImageRecord]) -> list[ImageRecord]:
    """Annotation ids from 1 within a derived split, as in every other split."""
    counter = 0
    out = []
    for image in images:
        anns = []
        for ann in image.annotations:
            counter += 1
            anns.append(replace(ann, id=counter))
        out.append(replace(image, annotations=anns))
    return out


def fewshot(
    images: list[ImageRecord], n_classes: int, k: int = 10, seed: int = 0, max_rounds: int = 1000
) -> list[ImageRecord]:
    """K instances per class drawn from ``images`` (a train split in file order)."""
    rng = random.Random(seed)
    in_file_order = sorted(
        ((ann, image.image_id) for image in images for ann in image.annotations), key=lambda pair: pair[0].id
    )
    kept: dict[int, set[int]] = defaultdict(set)  # image id -> ids of kept annotations
    for cls in range(n_classes):
        boxes_of: dict[int, list[Annotation]] = {}
        for ann, image_id in in_file_order:
            if ann.category == cls and not ann.iscrowd:
                boxes_of.setdefault(image_id, []).append(ann)
        if not boxes_of:
            continue
        target = k if len(boxes_of) >= k else len(boxes_of)
        taken: list[Annotation] = []
        drawn: set[int] = set()
        for _ in range(max_rounds):
            for image_id in rng.sample(list(boxes_of), target):
                if image_id in drawn or len(boxes_of[image_id]) + len(taken) > target:
                    continue
                taken.extend(boxes_of[image_id])
                drawn.add(image_id)
                if len(taken) == target:
                    break
            if len(taken) == target:
                break
        if len(taken) != k:
            warnings.warn(
                f"few-shot split: class index {cls} has {len(taken)} of {k} instances "
                f"({sum(map(len, boxes_of.values()))} in {len(boxes_of)} train images)",
                FewShotWarning,
                stacklevel=2,
            )
        for image_id in drawn:
            kept[image_id].update(ann.id for ann in boxes_of[image_id])
    chosen = [
        replace(image, annotations=[a for a in image.annotations if a.id in kept[image.image_id]])
        for image in images
        if image.image_id in kept
    ]
    return _renumbered(chosen)


def semisup(images: list[ImageRecord], fraction: float = 0.1, seed: int = 0) -> list[ImageRecord]:
    """A seeded ``fraction`` of ``images`` (at least one), returned in file-name order."""
    if not 0 < fraction <= 1:
        raise ValueError(f"semi-supervised fraction must be in (0, 1], got {fraction}")
    ordered = sorted(images, key=lambda image: image.file_name)
    count = max(1, round(fraction * len(ordered)))
    picked = sorted(random.Random(seed).sample(range(len(ordered)), count))
    return _renumbered([ordered[i] for i in picked])
