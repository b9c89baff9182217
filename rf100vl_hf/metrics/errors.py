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
"""

from __future__ import annotations

import csv
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
        cells = np.argwhere(classes > 0)
        ranked = sorted(cells.tolist(), key=lambda cell: (-classes[cell[0], cell[1]], cell[0], cell[1]))[:top]
        return [{"truth": self.class_names[t], "predicted": self.class_names[p], "count": int(classes[t, p])}
                for t, p in ranked]

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
    images by place."""
    tide = evaluator.tide_errors(pos_thr=FOREGROUND_IOU, bg_thr=BACKGROUND_IOU)
    if not boxes:
        tide = {**tide, "ap_base": math.nan, "delta_ap": dict.fromkeys(tide["delta_ap"], math.nan)}
    confusion = evaluator.confusion_matrix(iou_thr=FOREGROUND_IOU, max_det=max_dets)
    fixed = float(scores[0]) if len(scores) and (scores == scores[0]).all() else None
    ece = mce = None
    if len(scores) and fixed is None:
        calibration = evaluator.calibration(n_bins=CALIBRATION_BINS, iou_threshold=FOREGROUND_IOU)
        ece, mce = float(calibration["ece"]), float(calibration["mce"])
    diagnostics = evaluator.image_diagnostics(iou_thr=FOREGROUND_IOU, score_thr=LABEL_ERROR_SCORE)
    candidates = sorted(diagnostics["label_errors"], key=lambda e: (-e["dt_score"], e["image_id"], e["dt_id"]))
    return ErrorAnalysis(
        ap50=float(tide["ap_base"]),
        delta_ap={name: float(tide["delta_ap"][_HOTCOCO_KEYS[name]]) for name in (*TIDE_TYPES, *TIDE_ORACLES)},
        counts={name: int(tide["counts"][_HOTCOCO_KEYS[name]]) for name in TIDE_TYPES},
        class_names=list(confusion["cat_names"]),
        confusion=np.asarray(confusion["matrix"], dtype=np.int64),
        ece=ece, mce=mce, fixed_score=fixed,
        label_errors=tuple(
            LabelErrorCandidate(int(e["image_id"]), str(e["type"]), str(e["dt_category"]),
                                None if e["gt_category"] is None else str(e["gt_category"]), float(e["dt_score"]))
            for e in candidates[:LABEL_ERRORS_KEPT]
        ),
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
