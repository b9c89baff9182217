"""The few-shot and semi-supervised splits, made from a train split.

``fewshot`` follows the sampling of the RF100-VL challenge tooling (the FsDet recipe):
K *instances* per class, not K images. One ``random.Random(seed)`` serves every class, in
category-id order. For each class, the images holding it are listed in annotation-file
order; while fewer than K instances are taken, K of those images are drawn with
``random.sample`` and each drawn image's boxes of that class are all taken, unless the
image was taken already or its boxes would exceed K. When a class is in fewer than K
images, the target drops to the number of images and the first pass takes them in order
without drawing, as the tooling does. Crowd boxes are skipped.

The tooling loops forever when the target cannot be met exactly (say two images with 6
boxes each and K = 10); here the draws stop after ``max_rounds``, the class keeps what it
has, and a :class:`FewShotWarning` says so. An image keeps only the boxes of the classes
it was drawn for: the others in it are unlabelled, so the split is federated and
training or evaluating on it must not treat missing boxes as background.

That is the ``random`` strategy. The ``best`` strategy is the RF100-VL paper's learning-free
"best split" (Appendix E): for each class it looks at ``candidates`` random selections and
keeps the one whose boxes have the largest mean area. Candidate ``j`` (from 0) of a class is
exactly what the ``random`` strategy takes for that class with seed ``seed + j`` (its own
``random.Random(seed + j)`` run over every class in category-id order), so candidate 0 is the
``random`` split and ``candidates=1`` gives the ``random`` split. Of a class's candidates the
one that took the most instances wins (all K wherever K is reachable, so a draw that stopped
short never wins on a few large boxes), then the largest mean box area (``w * h`` of the
boxes, not the export's ``area``, which may be a segment's), then the lowest ``j``. A class
with no box keeps nothing.

``semisup`` is a seeded random fraction of the train images after sorting them by file
name, so it does not depend on directory or JSON order.
"""

from __future__ import annotations

import random
import warnings
from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for hints only: the command line takes FEWSHOT_STRATEGIES from here without the reader
    from rf100vl_hf.rf100vl.reader import Annotation, ImageRecord


class FewShotWarning(UserWarning):
    """A class could not get exactly K instances in the generated few-shot split."""


FEWSHOT_STRATEGIES = ("random", "best")
"""How a generated few-shot split is drawn: the challenge tooling's way, or the paper's best split."""
TEST_SOURCES = ("full", "fewshot")
"""Where the ``test`` split comes from: the full export's test split (the default) or the
few-shot export's, which can differ from it (rf100-vl issue #31)."""
FEWSHOT_CLASS_MATCHES = ("name", "id")
"""How the few-shot export's classes are matched to the full export's: by name (the default;
a name the full export lacks stops the build) or by category id (names that differ are
mapped, with a warning listing the pairs)."""


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


def _boxes_by_class(images: list[ImageRecord], n_classes: int) -> list[dict[int, list[Annotation]]]:
    """For each class: image id -> that image's non-crowd boxes of the class, in file order."""
    by_class: list[dict[int, list[Annotation]]] = [{} for _ in range(n_classes)]
    in_file_order = sorted(((a, im.image_id) for im in images for a in im.annotations), key=lambda p: p[0].id)
    for ann, image_id in in_file_order:
        if not ann.iscrowd:
            by_class[ann.category].setdefault(image_id, []).append(ann)
    return by_class


def _draw(rng: random.Random, boxes_of: dict[int, list[Annotation]], k: int, max_rounds: int) -> list[int]:
    """The images drawn for one class, the way the challenge tooling draws them."""
    target, taken = k, 0
    drawn: list[int] = []
    for _ in range(max_rounds):
        if len(boxes_of) < target:
            target = len(boxes_of)
            candidates = list(boxes_of)
        else:
            candidates = rng.sample(list(boxes_of), target)
        for image_id in candidates:
            if image_id in drawn or taken + len(boxes_of[image_id]) > target:
                continue
            drawn.append(image_id)
            taken += len(boxes_of[image_id])
            if taken == target:
                break
        if taken == target:
            break
    return drawn


def _selections(by_class: list[dict[int, list[Annotation]]], k: int, seed: int, max_rounds: int) -> list[list[int]]:
    """Per class, the images the ``random`` strategy draws with ``seed``: one stream for every
    class in category-id order, as the tooling seeds once."""
    rng = random.Random(seed)
    return [_draw(rng, boxes_of, k, max_rounds) for boxes_of in by_class]


def _instances(boxes_of: dict[int, list[Annotation]], drawn: list[int]) -> int:
    return sum(len(boxes_of[image_id]) for image_id in drawn)


def _mean_box_area(boxes_of: dict[int, list[Annotation]], drawn: list[int]) -> float:
    """The mean ``w * h`` of a class's boxes in the images drawn for it (0 when none)."""
    areas = [ann.bbox[2] * ann.bbox[3] for image_id in drawn for ann in boxes_of[image_id]]
    return sum(areas) / len(areas) if areas else 0.0


def _best(
    by_class: list[dict[int, list[Annotation]]], k: int, seed: int, candidates: int, max_rounds: int
) -> list[list[int]]:
    """Per class, the best of the ``random`` selections with seeds ``seed`` to ``seed + candidates - 1``:
    the most instances, then the largest mean box area; ``max`` keeps the first (lowest seed) of equals."""
    drawn = [_selections(by_class, k, seed + j, max_rounds) for j in range(candidates)]
    return [
        max((selection[cls] for selection in drawn), key=lambda d: (_instances(of, d), _mean_box_area(of, d)))
        for cls, of in enumerate(by_class)
    ]


def fewshot(
    images: list[ImageRecord],
    n_classes: int,
    k: int = 10,
    seed: int = 0,
    max_rounds: int = 1000,
    class_names: list[str] | None = None,
    strategy: str = "random",
    candidates: int = 10,
) -> list[ImageRecord]:
    """K instances per class drawn from ``images`` (a train split in file order) by ``strategy``
    (``candidates`` is the number of selections the ``best`` strategy compares)."""
    if strategy not in FEWSHOT_STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, FEWSHOT_STRATEGIES))}, not {strategy!r}")
    if not (isinstance(candidates, int) and candidates >= 1):
        raise ValueError(f"candidates must be an integer of at least 1, not {candidates!r}")
    by_class = _boxes_by_class(images, n_classes)
    if strategy == "best":
        drawn_per_class = _best(by_class, k, seed, candidates, max_rounds)
    else:
        drawn_per_class = _selections(by_class, k, seed, max_rounds)
    kept: dict[int, set[int]] = defaultdict(set)  # image id -> ids of kept annotations
    short = []
    for cls, (boxes_of, drawn) in enumerate(zip(by_class, drawn_per_class)):
        for image_id in drawn:
            kept[image_id].update(ann.id for ann in boxes_of[image_id])
        taken = _instances(boxes_of, drawn)
        if taken != k:
            name = class_names[cls] if class_names else f"class index {cls}"
            available = sum(map(len, boxes_of.values()))
            short.append(f"{name}: {taken} ({available} in {len(boxes_of)} train images)")
    if short:
        warnings.warn(
            f"few-shot split: {len(short)} classes do not have {k} instances: " + "; ".join(short),
            FewShotWarning,
            stacklevel=2,
        )
    chosen = [
        replace(image, annotations=[a for a in image.annotations if a.id in kept[image.image_id]])
        for image in images
        if image.image_id in kept
    ]
    return _renumbered(chosen)


def semisup(images: list[ImageRecord], fraction: float = 0.1, seed: int = 0) -> list[ImageRecord]:
    """A seeded ``fraction`` of ``images`` (rounded, at least one), returned in file-name order."""
    if not 0 < fraction <= 1:
        raise ValueError(f"semi-supervised fraction must be in (0, 1], got {fraction}")
    ordered = sorted(images, key=lambda image: image.file_name)
    count = max(1, round(fraction * len(ordered)))
    picked = sorted(random.Random(seed).sample(range(len(ordered)), count))
    return _renumbered([ordered[i] for i in picked])
