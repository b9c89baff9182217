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


class _Unlabelled(list):
    """Unlabelled samples that can be relabelled, as :class:`~rf100vl_hf.training.samples.Samples` are."""

    def relabelled(self, labels: dict) -> list:
        from dataclasses import replace

        return [replace(s, boxes=labels[i][0], labels=labels[i][1]) for i, s in enumerate(self)]


def test_stac_trains_a_teacher_once_and_a_student_on_labels_plus_confident_pseudo_labels(tmp_path) -> None:
    from PIL import Image

    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.samples import Sample
    from rf100vl_hf.training.stac import stac
    from rf100vl_hf.training.store import FitRecord, TrainedStore

    image = Image.new("RGB", (32, 32))
    labelled = [Sample(image, np.array([_box(0, 0)]), np.array([0]))]
    validation = [Sample(image, np.array([_box(0, 0)]), np.array([0]))]
    unlabelled = _Unlabelled([Sample(image, np.zeros((0, 4)), np.zeros(0, dtype=np.int64)) for _ in range(2)])
    # a teacher that finds the true box at 0.8 and a wrong one at 0.9 on validation (F1 is best
    # at 0.8: one of two kept is right), and on the unlabelled images boxes at 0.85 and 0.5
    guesses = {id(validation): ([_box(0, 0), _box(20, 20)], [0.8, 0.9]),
               id(unlabelled): ([_box(5, 5), _box(1, 1)], [0.85, 0.5])}
    trained: list[tuple[int, int, str]] = []

    def train(samples, recipe, store):
        trained.append((len(samples), recipe.epochs, store.folder.name))
        if store.folder.name != "teacher" and len(trained) == 2:
            raise KeyboardInterrupt  # killed while the student trains
        store.weights.parent.mkdir(parents=True, exist_ok=True)
        store.weights.write_bytes(b"weights")
        return store.finish(FitRecord(epochs=recipe.epochs, steps=3, train_s=2.0, images=3, losses={}, first_losses={}))

    def predict(samples):
        boxes, scores = guesses[id(samples)]
        return {i: (np.array(boxes), np.array(scores), np.array([0, 0])) for i in range(len(samples))}

    recipe = Recipe("stac", epochs=4, batch_size=1, learning_rate=1e-3, extra={"student_epochs": 7})
    store = TrainedStore(tmp_path / "fit", {"model": "m"})
    loads: list[str] = []
    arguments = dict(train=train, load=lambda s: loads.append(s.folder.name), predict=predict)
    with pytest.raises(KeyboardInterrupt):
        stac(labelled, validation, unlabelled, recipe, store, **arguments)
    record = stac(labelled, validation, unlabelled, recipe, store, **arguments)
    assert trained == [(1, 4, "teacher"), (3, 7, "fit"), (3, 7, "fit")] and loads == ["teacher"]
    assert record.details["threshold"] == 0.8 and record.details["teacher_f1"] == pytest.approx(2 / 3)
    assert record.details["pseudo_boxes"] == 2  # the 0.85 box of each unlabelled image
    assert record.train_s == 4.0 and store.record().details == record.details


def test_stac_refuses_a_split_with_nothing_unlabelled(tmp_path) -> None:
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.stac import stac
    from rf100vl_hf.training.store import TrainedStore

    with pytest.raises(ValueError, match="needs unlabelled images"):
        stac([], [], _Unlabelled(), Recipe("stac", epochs=1, batch_size=1, learning_rate=1e-3),
             TrainedStore(tmp_path, {}), train=None, load=None, predict=None)
