"""STAC (Sohn et al. 2020) for the semi-supervised regime (RF100-VL Table 7, "w/ STAC"): a
teacher trained on the labelled 10% labels the rest of train; its boxes are kept above the
confidence that maximises the teacher's F1 on the validation split, and a student is trained
on both. Here are the choice of that confidence, the pseudo-labels and the teacher-student
sequence (:func:`stac`); how a model trains and predicts is the adapter's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from rf100vl_hf.boxes import box_iou
from rf100vl_hf.training.store import TrainedStore

if TYPE_CHECKING:
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.samples import Sample, Samples
    from rf100vl_hf.training.store import FitRecord

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


class Joined(Sequence["Sample"]):
    """Two sequences of samples read as one (the labelled split, then the pseudo-labelled rest)."""

    def __init__(self, first: Sequence["Sample"], second: Sequence["Sample"]):
        self.first, self.second = first, second

    def __len__(self) -> int:
        return len(self.first) + len(self.second)

    def __getitem__(self, index: int) -> "Sample":  # type: ignore[override]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self.first[index] if index < len(self.first) else self.second[index - len(self.first)]


def truth_of(samples: Sequence["Sample"]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each sample's true ``xyxy`` boxes and classes, by position."""
    return {i: (samples[i].boxes, samples[i].labels) for i in range(len(samples))}


def stac(
    labelled: Sequence["Sample"], validation: Sequence["Sample"], unlabelled: "Samples", recipe: "Recipe",
    store: "TrainedStore", *, train: Callable[[Sequence["Sample"], "Recipe", "TrainedStore"], "FitRecord"],
    load: Callable[["TrainedStore"], None], predict: Callable[[Sequence["Sample"]], Predictions],
) -> "FitRecord":
    """The teacher (trained on ``labelled`` for ``recipe.epochs``, kept in ``store/teacher`` so
    that a run killed while the student trains keeps it), its F1-maximising confidence on
    ``validation``, its pseudo-labels on ``unlabelled``, and the student, trained on both for
    ``recipe.extra["student_epochs"]``; the student's record says what the teacher cost.

    ``train(samples, recipe, store)`` fits the model from its checkpoint into ``store``,
    ``load(store)`` loads a finished fit, ``predict(samples)`` gives the model's detections by
    position."""

    if not len(unlabelled):
        raise ValueError("recipe 'stac' needs unlabelled images: train on a semi-supervised split")
    teacher_store = TrainedStore(store.folder / "teacher", store.key)
    teacher = teacher_store.record()
    if teacher is None:
        teacher = train(labelled, recipe, teacher_store)
    else:
        load(teacher_store)
    choice = f1_maximizing_threshold(predict(validation), truth_of(validation))
    pseudo = pseudo_labels(predict(unlabelled), choice.threshold)
    student = replace(recipe, epochs=int(recipe.extra["student_epochs"]))
    record = train(Joined(labelled, unlabelled.relabelled(pseudo)), student, store)
    record.details = {**record.details, "teacher_steps": teacher.steps, "teacher_train_s": teacher.train_s,
                      "threshold": choice.threshold, "teacher_f1": choice.f1,
                      "pseudo_boxes": int(sum(len(labels) for _, labels in pseudo.values()))}
    record.train_s += teacher.train_s
    return store.finish(record)
