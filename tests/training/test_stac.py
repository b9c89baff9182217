"""STAC's pseudo-label confidence: the one that maximises the teacher's F1 on validation,
checked by hand and against a brute-force re-matching at every candidate threshold."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rf100vl_hf.training.stac import f1_maximizing_threshold, pseudo_labels


def _box(x: float, y: float, size: float = 10.0) -> list[float]:
    return [x, y, x + size, y + size]


def _naive_iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _brute_force(predictions: dict, truth: dict, iou: float = 0.5) -> float:
    """The best F1 over every candidate threshold, matching again from scratch at each."""
    scores = sorted({float(s) for _, s, _ in predictions.values() for s in s}, reverse=True)
    total = sum(len(labels) for _, labels in truth.values())
    best = 0.0
    for threshold in scores:
        tp = kept = 0
        for image_id, (boxes, image_scores, labels) in predictions.items():
            true_boxes, true_labels = truth.get(image_id, (np.zeros((0, 4)), np.zeros(0)))
            order = sorted((i for i in range(len(image_scores)) if image_scores[i] >= threshold),
                           key=lambda i: -image_scores[i])
            taken: set[int] = set()
            for i in order:
                kept += 1
                options = [(j, _naive_iou(list(boxes[i]), list(true_boxes[j]))) for j in range(len(true_labels))
                           if j not in taken and true_labels[j] == labels[i]]
                options = [(j, v) for j, v in options if v >= iou]
                if options:
                    taken.add(max(options, key=lambda item: item[1])[0])
                    tp += 1
        best = max(best, 2 * tp / (kept + total))
    return best


def test_the_threshold_found_by_hand() -> None:
    truth = {0: (np.array([_box(0, 0), _box(50, 50)]), np.array([0, 0])), 1: (np.array([_box(0, 0)]), np.array([1]))}
    predictions = {
        0: (np.array([_box(100, 100), _box(0, 0), _box(50, 50)]), np.array([0.95, 0.9, 0.3]), np.array([0, 0, 0])),
        1: (np.array([_box(0, 0), _box(0, 0)]), np.array([0.8, 0.6]), np.array([0, 1])),  # wrong class first
    }
    # by score: 0.95 FP, 0.9 TP, 0.8 FP, 0.6 TP, 0.3 TP; 3 true boxes. F1 = 2TP / (kept + 3):
    # >=0.95: 0; >=0.9: 2/5; >=0.8: 2/6; >=0.6: 4/7; >=0.3: 6/8 (best)
    choice = f1_maximizing_threshold(predictions, truth)
    assert (choice.threshold, choice.true_positives, choice.kept, choice.ground_truth) == (0.3, 3, 5, 3)
    assert choice.f1 == pytest.approx(6 / 8) and choice.precision == pytest.approx(3 / 5) and choice.recall == 1.0


def test_of_equal_f1_the_highest_threshold_wins_and_iou_of_exactly_one_half_counts() -> None:
    truth = {0: (np.array([_box(0, 0), _box(40, 40)]), np.array([0, 0]))}
    half = [0, 0, 10, 5]  # inside the true box, half its area: IoU exactly 0.5
    predictions = {0: (np.array([half, _box(200, 200), _box(40, 40)]), np.array([0.9, 0.5, 0.4]), np.array([0, 0, 0]))}
    # 0.9 TP (IoU 0.5), 0.5 FP, 0.4 TP: F1 at 0.9 = 2/3, at 0.5 = 2/4, at 0.4 = 4/5 -> 0.4
    assert f1_maximizing_threshold(predictions, truth).threshold == 0.4
    tied = {0: (np.array([_box(0, 0), _box(200, 200), _box(300, 300), _box(40, 40)]),
                np.array([0.9, 0.7, 0.6, 0.2]), np.array([0, 0, 0, 0]))}
    # F1: 0.9 -> 2/3; 0.7 -> 2/4; 0.6 -> 2/5; 0.2 -> 4/6 = 2/3: a tie, the higher threshold wins
    assert f1_maximizing_threshold(tied, truth).threshold == 0.9


def test_no_true_positive_keeps_nothing() -> None:
    truth = {0: (np.array([_box(0, 0)]), np.array([0]))}
    choice = f1_maximizing_threshold({0: (np.array([_box(90, 90)]), np.array([0.9]), np.array([0]))}, truth)
    assert math.isinf(choice.threshold) and choice.f1 == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_the_best_f1_equals_a_brute_force_rematching_at_every_threshold(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth, predictions = {}, {}
    for image_id in range(6):
        n = int(rng.integers(0, 4))
        corners = rng.uniform(0, 60, size=(n, 2))
        truth[image_id] = (np.hstack([corners, corners + 20]), rng.integers(0, 2, size=n))
        m = int(rng.integers(0, 6))
        jitter = rng.uniform(0, 60, size=(m, 2))
        predictions[image_id] = (np.hstack([jitter, jitter + rng.uniform(10, 30, size=(m, 1))]),
                                 np.round(rng.uniform(0, 1, size=m), 1), rng.integers(0, 2, size=m))
    assert f1_maximizing_threshold(predictions, truth).f1 == pytest.approx(_brute_force(predictions, truth), abs=1e-12)


def test_pseudo_labels_keep_exactly_the_boxes_at_or_above_the_threshold() -> None:
    boxes = np.array(list(itertools.islice((_box(i, i) for i in itertools.count(0, 20)), 3)))
    kept = pseudo_labels({7: (boxes, np.array([0.2, 0.5, 0.9]), np.array([1, 0, 1]))}, 0.5)
    np.testing.assert_array_equal(kept[7][0], boxes[1:])
    assert kept[7][1].tolist() == [0, 1]
