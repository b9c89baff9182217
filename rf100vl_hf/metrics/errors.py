"""Why an AP is what it is (``docs/errors.md``): TIDE's error types, the confusion matrix,
calibration and label-error candidates of one scored split.

Every figure is hotcoco's, read from the evaluator that gave the AP
(:func:`rf100vl_hf.metrics.backends.hotcoco_evaluator`), so it rests on pycocotools' own
matching and AP50 (hotcoco's arrays equal pycocotools'):

- TIDE (Bolya et al., ECCV 2020): each false positive is a classification, localisation,
  both, duplicate or background error, each missed box a missed error; the ΔAP of a type is
  what AP50 gains when its errors are fixed, and the two oracles remove all false positives or
  all false negatives. Foreground IoU 0.5, background below 0.1, as in tidecv (whose own AP
  differs from pycocotools' by a few tenths, so tidecv is a cross-check, not the base).
- The confusion matrix at IoU 0.5: rows the true class, columns the predicted class, with a
  background row (detections matching nothing) and column (boxes nothing found).
- ECE and MCE over 10 confidence bins (a detection is right when it matches at IoU 0.5);
  undefined when every box has the same score (the chat models' 1.0).
- Label-error candidates: confident detections (score >= 0.5) that hit a box of another class
  or no box at all, the best-scored few; where the annotation may be what is wrong.

Each analysis is one hotcoco call on that evaluator (``docs/errors.md``, *Cost*, says what each
costs). The label-error candidates are asked for among the best-scored confident detections
first: hotcoco returns a dict for every candidate, a split can have tens of thousands of them,
and a row keeps ten.
"""

from __future__ import annotations

import csv
import heapq
import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rf100vl_hf.boxes import box_iou, xywh_to_xyxy


TIDE_TYPES: tuple[str, ...] = ("cls", "loc", "both", "dupe", "bkg", "miss")
"""The six error types, in tidecv's order."""
TIDE_ORACLES: tuple[str, ...] = ("fp", "fn")
"""The two oracles: every false positive removed, every false negative removed."""
ERROR_NAMES: dict[str, str] = {
    "cls": "classification", "loc": "localisation", "both": "both", "dupe": "duplicate", "bkg": "background",
    "miss": "missed", "fp": "all false positives", "fn": "all false negatives",
}
_HOTCOCO_KEYS = {"cls": "Cls", "loc": "Loc", "both": "Both", "dupe": "Dupe", "bkg": "Bkg", "miss": "Miss",
                 "fp": "FP", "fn": "FN"}
FOREGROUND_IOU = 0.5
BACKGROUND_IOU = 0.1
BACKGROUND = "background"
"""The confusion matrix's extra row and column."""
CALIBRATION_BINS = 10
LABEL_ERROR_SCORE = 0.5
LABEL_ERRORS_KEPT = 10
"""Label-error candidates a row names (the best-scored ones)."""
LABEL_ERROR_SEARCH = 1000
"""The best-scored confident detections whose candidates are asked for first; all confident
ones only when those hold fewer than :data:`LABEL_ERRORS_KEPT`."""
CONFUSED_PAIRS_KEPT = 5
TRUE_POSITIVE = "tp"


@dataclass(frozen=True)
class LabelErrorCandidate:
    """A confident detection the ground truth disagrees with: ``wrong_label`` (it covers a box of
    another class) or ``missing_annotation`` (it covers no box)."""

    image_id: int
    kind: str
    predicted: str
    truth: str | None
    score: float


@dataclass(frozen=True)
class ErrorAnalysis:
    """The errors behind one split's AP (see the module docstring); ΔAP as fractions of AP50."""

    ap50: float  # pycocotools' AP50, which each ΔAP is added to
    delta_ap: dict[str, float]  # TIDE_TYPES + TIDE_ORACLES -> ΔAP50; NaN when AP50 is (no ground-truth box)
    counts: dict[str, int]  # TIDE_TYPES -> errors of that type
    class_names: list[str]
    confusion: np.ndarray  # (K + 1, K + 1) counts: rows true class, columns predicted, last = background
    ece: float | None  # None when undefined (no detection, or one score for all)
    mce: float | None
    fixed_score: float | None  # the one score every detection had, when they all had one
    label_errors: tuple[LabelErrorCandidate, ...]

    def confused_pairs(self, top: int = CONFUSED_PAIRS_KEPT) -> list[dict[str, Any]]:
        """The ``top`` most frequent confusions of one class for another (background left out):
        ``{truth, predicted, count}``, most frequent first."""
        classes = self.confusion[:-1, :-1].copy()
        np.fill_diagonal(classes, 0)
        truth, predicted = np.nonzero(classes)  # row by row: ties stay in (truth, predicted) order
        counts = classes[truth, predicted]
        ranked = np.argsort(-counts, kind="stable")[:top]
        return [{"truth": self.class_names[t], "predicted": self.class_names[p], "count": n}
                for t, p, n in zip(truth[ranked].tolist(), predicted[ranked].tolist(), counts[ranked].tolist())]

    def confusion_csv(self) -> str:
        """The matrix as CSV labelled with class names: a header row of predicted classes, one row
        per true class, the background last on both axes."""
        labels = [*self.class_names, BACKGROUND]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["truth \\ predicted", *labels])
        for label, counts in zip(labels, self.confusion.tolist()):
            writer.writerow([label, *counts])
        return out.getvalue()

    @property
    def calibration_note(self) -> str | None:
        """Why ECE and MCE are missing, when they are."""
        if self.fixed_score is not None:
            return f"every detection scored {self.fixed_score:g}: calibration is undefined"
        return "no detections" if self.ece is None else None


def analyse(evaluator: Any, scores: np.ndarray, max_dets: int, boxes: int) -> ErrorAnalysis:
    """The error analysis of an evaluated and accumulated hotcoco ``COCOeval`` whose images and
    categories are numbered by place (as :func:`~rf100vl_hf.metrics.backends.hotcoco_evaluator`
    builds it), of its detections' ``scores`` and its number of ground-truth ``boxes`` (none:
    AP50 and the ΔAPs are undefined, NaN, where hotcoco reports 0); label-error candidates name
    images by place. Each analysis is one hotcoco call (two, rarely, for the label errors)."""
    ap50, delta_ap, counts = tide(evaluator, boxes)
    class_names, matrix = confusion(evaluator, max_dets)
    fixed = float(scores[0]) if len(scores) and (scores == scores[0]).all() else None
    ece, mce = calibration(evaluator) if len(scores) and fixed is None else (None, None)
    return ErrorAnalysis(ap50=ap50, delta_ap=delta_ap, counts=counts, class_names=class_names, confusion=matrix,
                         ece=ece, mce=mce, fixed_score=fixed, label_errors=label_error_candidates(evaluator, scores))


def tide(evaluator: Any, boxes: int) -> tuple[float, dict[str, float], dict[str, int]]:
    """AP50, the ΔAP50 of each of :data:`TIDE_TYPES` and :data:`TIDE_ORACLES` (NaN without
    ground-truth ``boxes``) and the count of each type: hotcoco's ``tide_errors``."""
    found = evaluator.tide_errors(pos_thr=FOREGROUND_IOU, bg_thr=BACKGROUND_IOU)
    undefined = not boxes
    return (
        math.nan if undefined else float(found["ap_base"]),
        {name: math.nan if undefined else float(found["delta_ap"][_HOTCOCO_KEYS[name]])
         for name in (*TIDE_TYPES, *TIDE_ORACLES)},
        {name: int(found["counts"][_HOTCOCO_KEYS[name]]) for name in TIDE_TYPES},
    )


def confusion(evaluator: Any, max_dets: int) -> tuple[list[str], np.ndarray]:
    """The class names and the ``(K + 1, K + 1)`` confusion matrix: hotcoco's ``confusion_matrix``."""
    found = evaluator.confusion_matrix(iou_thr=FOREGROUND_IOU, max_det=max_dets)
    return list(found["cat_names"]), np.asarray(found["matrix"], dtype=np.int64)


def calibration(evaluator: Any) -> tuple[float, float]:
    """ECE and MCE: hotcoco's ``calibration`` (meaningful when the detections' scores differ)."""
    found = evaluator.calibration(n_bins=CALIBRATION_BINS, iou_threshold=FOREGROUND_IOU)
    return float(found["ece"]), float(found["mce"])


def label_error_candidates(evaluator: Any, scores: np.ndarray) -> tuple[LabelErrorCandidate, ...]:
    """The :data:`LABEL_ERRORS_KEPT` best-scored label-error candidates of hotcoco's
    ``image_diagnostics`` at :data:`LABEL_ERROR_SCORE` (ties by image, then detection), asked
    for at the score of the :data:`LABEL_ERROR_SEARCH`-th best confident detection first: hotcoco
    judges each detection on its own, so the candidates scored at least that are the first ones
    of the whole list, and enough of them are all the row needs."""
    confident = scores[scores >= LABEL_ERROR_SCORE]
    if not len(confident):
        return ()
    floor = LABEL_ERROR_SCORE
    if len(confident) > LABEL_ERROR_SEARCH:
        floor = float(np.partition(confident, -LABEL_ERROR_SEARCH)[-LABEL_ERROR_SEARCH])
    found = evaluator.image_diagnostics(iou_thr=FOREGROUND_IOU, score_thr=floor)["label_errors"]
    if len(found) < LABEL_ERRORS_KEPT and floor > LABEL_ERROR_SCORE:
        found = evaluator.image_diagnostics(iou_thr=FOREGROUND_IOU, score_thr=LABEL_ERROR_SCORE)["label_errors"]
    best = heapq.nsmallest(LABEL_ERRORS_KEPT, found, key=lambda e: (-e["dt_score"], e["image_id"], e["dt_id"]))
    return tuple(
        LabelErrorCandidate(int(e["image_id"]), str(e["type"]), str(e["dt_category"]),
                            None if e["gt_category"] is None else str(e["gt_category"]), float(e["dt_score"]))
        for e in best
    )


def image_errors(truth_boxes: np.ndarray, truth_classes: np.ndarray, boxes: np.ndarray, classes: np.ndarray,
                 matched: np.ndarray) -> tuple[list[str], np.ndarray]:
    """One image's boxes by TIDE's rules, for a picture of it: each detection's type
    (:data:`TRUE_POSITIVE` where pycocotools' matching at IoU 0.5 ``matched`` it, else one of
    :data:`TIDE_TYPES` but ``miss``, tested in tidecv's order: localisation, classification,
    duplicate, background, both), and which ground-truth boxes were found (a matched detection
    of their class covers them at IoU 0.5); boxes ``[x, y, w, h]``."""
    iou = box_iou(xywh_to_xyxy(np.asarray(boxes, dtype=np.float64).reshape(-1, 4)),
                  xywh_to_xyxy(np.asarray(truth_boxes, dtype=np.float64).reshape(-1, 4)))
    same = np.asarray(classes)[:, None] == np.asarray(truth_classes)[None, :]
    best_same = np.where(same, iou, 0.0).max(axis=1, initial=0.0)
    best_other = np.where(~same, iou, 0.0).max(axis=1, initial=0.0)
    best_any = iou.max(axis=1, initial=0.0)
    types = []
    for i, hit in enumerate(np.asarray(matched, dtype=bool)):
        if hit:
            types.append(TRUE_POSITIVE)
        elif BACKGROUND_IOU <= best_same[i] < FOREGROUND_IOU:
            types.append("loc")
        elif best_other[i] >= FOREGROUND_IOU:
            types.append("cls")
        elif best_same[i] >= FOREGROUND_IOU:
            types.append("dupe")
        elif best_any[i] <= BACKGROUND_IOU:
            types.append("bkg")
        else:
            types.append("both")
    found = (same & (iou >= FOREGROUND_IOU) & np.asarray(matched, dtype=bool)[:, None]).any(axis=0)
    return types, found
