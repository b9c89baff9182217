"""UOUO grounding metrics: quadrant accuracy, mIoU and accuracy at IoU >= 0.5, and the errors
behind them: the quadrant confusion (four quadrants and "no answer") and the IoU distribution.

Every mosaic asks two questions about one target object: where it is (a box) and which
quadrant it is in (one of :data:`QUADRANTS`). A model may answer either or both; a model
that gives only a box answers the quadrant through the box centre. An answer that is
missing or cannot be read scores IoU 0 and counts as wrong, and is counted as a parse
failure: a model that fails to answer cannot look better than one that answers badly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from rf100vl_hf.boxes import box_iou

QUADRANTS: tuple[str, ...] = ("top-left", "top-right", "bottom-left", "bottom-right")
NO_ANSWER = "no answer"
"""The quadrant confusion's fifth column: no quadrant could be read (``docs/errors.md``)."""
IOU_BINS = 10
"""The IoU distribution's bins: tenths, the last one holding IoU 1."""
IOU_HIT = 0.5
"""IoU from which a predicted box counts as a hit for ``acc50``."""


class Answer(Protocol):
    """What a model answered: an ``xyxy`` pixel box and/or a quadrant word, ``None`` where absent."""

    box: Sequence[float] | None
    quadrant: str | None


@dataclass(frozen=True)
class GroundingTarget:
    """The truth about one mosaic's target: its ``xyxy`` pixel box, its quadrant, the canvas size."""

    box: tuple[float, float, float, float]
    quadrant: str
    width: int
    height: int


@dataclass(frozen=True)
class GroundingScores:
    """Scores over ``n`` questions; rates are fractions in [0, 1]."""

    n: int
    quadrant_accuracy: float
    miou: float
    acc50: float  # fraction of targets whose predicted box has IoU >= 0.5
    box_parse_failures: int  # answers with no readable box
    quadrant_parse_failures: int  # answers with no readable quadrant word and no box to read one from
    parse_failures: int  # answers with either failure
    quadrant_confusion: dict[tuple[str, str], int] = field(default_factory=dict)
    """(target's quadrant, answered quadrant or :data:`NO_ANSWER`) -> mosaics."""
    iou_histogram: tuple[int, ...] = ()  # targets per IoU bin of :data:`IOU_BINS`
    iou_median: float = 0.0

    @property
    def parse_failure_rate(self) -> float:
        return self.parse_failures / self.n


def quadrant_of(box_xyxy: Sequence[float], width: float, height: float) -> str:
    """The quadrant holding the box centre; a centre on a midline belongs to the right or bottom half."""
    if width <= 0 or height <= 0:
        raise ValueError(f"canvas size must be positive, got {width}x{height}")
    x1, y1, x2, y2 = (float(v) for v in box_xyxy)
    vertical = "top" if (y1 + y2) / 2 < height / 2 else "bottom"
    horizontal = "left" if (x1 + x2) / 2 < width / 2 else "right"
    return f"{vertical}-{horizontal}"


def _read_box(box: Any) -> np.ndarray | None:
    """Four finite numbers, else ``None`` (a parse failure)."""
    if box is None:
        return None
    try:
        array = np.asarray(box, dtype=np.float64).reshape(4)
    except (TypeError, ValueError):
        return None
    return array if np.isfinite(array).all() else None


def _read_quadrant(word: Any) -> str | None:
    """One of :data:`QUADRANTS`, allowing case, spaces and underscores ("Top Left"), else ``None``."""
    if not isinstance(word, str):
        return None
    normal = "-".join(word.strip().lower().replace("_", " ").replace("-", " ").split())
    return normal if normal in QUADRANTS else None


def score_grounding(predictions: Sequence[Answer], targets: Sequence[GroundingTarget]) -> GroundingScores:
    """Score answers against targets, pairwise in order.

    When an answer gives a quadrant word, that word is scored (an unreadable word is a
    failure even beside a box); when it gives none, the quadrant of its box centre is.
    Targets are this package's data, so a bad target is an error; answers come from models,
    so a bad answer is a counted parse failure.
    """
    if len(predictions) != len(targets):
        raise ValueError(f"{len(predictions)} answers for {len(targets)} targets")
    if not targets:
        raise ValueError("no answers to score")
    ious, correct = np.zeros(len(targets)), np.zeros(len(targets), dtype=bool)
    box_failures = quadrant_failures = any_failures = 0
    confusion: Counter[tuple[str, str]] = Counter()
    for i, (answer, target) in enumerate(zip(predictions, targets)):
        if target.quadrant not in QUADRANTS:
            raise ValueError(f"target {i}: quadrant {target.quadrant!r} is not one of {', '.join(QUADRANTS)}")
        box = _read_box(answer.box)
        quadrant = _read_quadrant(answer.quadrant)
        if quadrant is None and answer.quadrant is None and box is not None:
            quadrant = quadrant_of(box, target.width, target.height)
        if box is not None:
            ious[i] = box_iou(box, np.asarray(target.box, dtype=np.float64))[0, 0]
        correct[i] = quadrant == target.quadrant
        confusion[target.quadrant, quadrant or NO_ANSWER] += 1
        box_failures += box is None
        quadrant_failures += quadrant is None
        any_failures += box is None or quadrant is None
    return GroundingScores(
        n=len(targets),
        quadrant_accuracy=float(correct.mean()),
        miou=float(ious.mean()),
        acc50=float((ious >= IOU_HIT).mean()),
        box_parse_failures=box_failures,
        quadrant_parse_failures=quadrant_failures,
        parse_failures=any_failures,
        quadrant_confusion=dict(confusion),
        iou_histogram=tuple(np.bincount(np.minimum((ious * IOU_BINS).astype(int), IOU_BINS - 1),
                                        minlength=IOU_BINS).tolist()),
        iou_median=float(np.median(ious)),
    )
