"""STAC (Sohn et al. 2020) for the semi-supervised regime (RF100-VL Table 7, "w/ STAC"): a
teacher trained on the labelled 10% labels the rest of train; its boxes are kept above the
confidence that maximises the teacher's F1 on the validation split, and a student is trained
on both. Here are the choice of that confidence and the pseudo-labels; the recipe is the
adapter's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rf100vl_hf.boxes import box_iou

Predictions = Mapping[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
"""Image id -> ``xyxy`` boxes ``(N, 4)``, scores ``(N,)``, class indices ``(N,)``."""
Truth = Mapping[int, tuple[np.ndarray, np.ndarray]]
"""Image id -> ``xyxy`` boxes ``(M, 4)``, class indices ``(M,)``."""


@dataclass(frozen=True)
class ThresholdChoice:
    """The confidence that maximises F1, and the counts at it."""

    threshold: float
    f1: float
    precision: float
    recall: float
    true_positives: int
    kept: int
    ground_truth: int


def true_positives(predictions: Predictions, truth: Truth, iou: float = 0.5) -> tuple[np.ndarray, np.ndarray, int]:
    """Every prediction's score and whether it is a true positive, and the number of true boxes.

    Per image and class, predictions are matched greedily from the highest score to an unmatched
    true box of the same class with IoU >= ``iou`` (COCO's rule). A prediction's status does not
    depend on the threshold: a threshold only drops lower-scored predictions, which come later."""
    scores, hits, total = [], [], 0
    for image_id in set(predictions) | set(truth):
        boxes, score, labels = (np.asarray(a) for a in predictions.get(image_id, (np.zeros((0, 4)), [], [])))
        true_boxes, true_labels = (np.asarray(a) for a in truth.get(image_id, (np.zeros((0, 4)), [])))
        total += len(true_labels)
        for cls in np.unique(labels):
            mine = np.flatnonzero(labels == cls)
            mine = mine[np.argsort(-score[mine], kind="stable")]
            theirs = np.flatnonzero(true_labels == cls)
            overlaps = box_iou(boxes[mine].reshape(-1, 4), true_boxes[theirs].reshape(-1, 4))
            taken = np.zeros(len(theirs), dtype=bool)
            for row in range(len(mine)):
                candidates = np.where(~taken & (overlaps[row] >= iou), overlaps[row], -1.0)
                best = int(np.argmax(candidates)) if len(theirs) else -1
                hit = best >= 0 and candidates[best] >= 0
                if hit:
                    taken[best] = True
                scores.append(float(score[mine[row]]))
                hits.append(hit)
    return np.asarray(scores, dtype=np.float64), np.asarray(hits, dtype=bool), total


def f1_maximizing_threshold(predictions: Predictions, truth: Truth, iou: float = 0.5) -> ThresholdChoice:
    """The confidence whose kept predictions (score >= it) have the highest F1 against ``truth``.

    Every distinct score is a candidate; of equal F1, the highest threshold wins (fewer, surer
    pseudo-labels). With no true positive at all, the threshold is infinite: keep nothing."""
    scores, hits, total = true_positives(predictions, truth, iou)
    if not hits.any():
        return ThresholdChoice(float("inf"), 0.0, 0.0, 0.0, 0, 0, total)
    order = np.argsort(-scores, kind="stable")
    scores, hits = scores[order], hits[order]
    last_of_score = np.flatnonzero(np.r_[scores[1:] != scores[:-1], True])  # kept = index + 1
    tp = np.cumsum(hits)[last_of_score]
    kept = last_of_score + 1
    f1 = 2 * tp / (kept + total)
    best = int(np.flatnonzero(f1 == f1.max())[0])  # the first is the highest threshold
    return ThresholdChoice(float(scores[last_of_score[best]]), float(f1[best]), float(tp[best] / kept[best]),
                           float(tp[best] / total) if total else 0.0, int(tp[best]), int(kept[best]), total)


def pseudo_labels(predictions: Predictions, threshold: float) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per image, the predicted boxes and classes scored at least ``threshold``."""
    out = {}
    for image_id, (boxes, scores, labels) in predictions.items():
        keep = np.asarray(scores) >= threshold
        out[image_id] = (np.asarray(boxes).reshape(-1, 4)[keep], np.asarray(labels)[keep])
    return out
