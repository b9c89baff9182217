"""Model output keeps what pycocotools' maxDets keeps: the best 500 per image *and class*.

Checked against pycocotools given the raw output, on a constructed case where a cap of 500
per image across classes changes the score, and on tied scores (pycocotools breaks ties by
input order).
"""

from __future__ import annotations

import numpy as np
import pytest

from rf100vl_hf.boxes import MAX_DETECTIONS, sanitize_detections, xywh_to_xyxy, xyxy_to_xywh
from rf100vl_hf.metrics import BACKENDS, evaluate

from tests.support.coco_reference import precision_ap, pycocotools_eval

WIDTH, HEIGHT = 1000, 800


def crowded_case(tied: bool) -> tuple[dict, list[dict]]:
    """One image; class 1: 500 confident false positives (more with ``tied``); class 2: 50
    boxes found with lower scores. Scores are rounded to one decimal with ``tied``."""
    rng = np.random.default_rng(5)
    truth = [[float(x), float(y), 30.0, 30.0] for x, y in rng.uniform(0, 700, (50, 2))]
    annotations = [
        {"id": i, "image_id": 1, "category_id": 2, "bbox": box, "area": 900.0, "iscrowd": 0}
        for i, box in enumerate(truth, start=1)
    ] + [{"id": 51, "image_id": 1, "category_id": 1, "bbox": [900.0, 700.0, 50.0, 50.0], "area": 2500.0, "iscrowd": 0}]
    ground_truth = {
        "images": [{"id": 1, "width": WIDTH, "height": HEIGHT}],
        "annotations": annotations,
        "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
    }
    n_false = 560 if tied else 500
    false = [
        {"image_id": 1, "category_id": 1, "bbox": [float(x), float(y), 20.0, 20.0], "score": float(s)}
        for (x, y), s in zip(rng.uniform(0, 600, (n_false, 2)), rng.uniform(0.6, 1.0, n_false))
    ]
    # with ties, the true positive of class 1 sits among equal scores: input order decides
    false.insert(n_false // 2, {"image_id": 1, "category_id": 1, "bbox": [900.0, 700.0, 50.0, 50.0], "score": 0.8})
    found = [
        {"image_id": 1, "category_id": 2, "bbox": [b[0] + 1, b[1], b[2], b[3]], "score": float(s)}
        for b, s in zip(truth, rng.uniform(0.1, 0.5, 50))
    ]
    predictions = false + found
    if tied:
        for p in predictions:
            p["score"] = round(p["score"], 1)
    return ground_truth, predictions


def through_sanitize(predictions: list[dict], category_ids: list[int], clip: bool = True) -> list[dict]:
    """Records as the runner makes them: xyxy output -> sanitize_detections -> COCO records."""
    boxes = xywh_to_xyxy(np.array([p["bbox"] for p in predictions]))
    scores = np.array([p["score"] for p in predictions])
    labels = np.array([category_ids.index(p["category_id"]) for p in predictions])
    safe = sanitize_detections(boxes, scores, labels, WIDTH, HEIGHT, clip=clip)
    return [
        {"image_id": 1, "category_id": category_ids[label], "bbox": box, "score": score}
        for box, score, label in zip(xyxy_to_xywh(safe.boxes).tolist(), safe.scores.tolist(), safe.labels.tolist())
    ]


@pytest.mark.parametrize("tied", [False, True], ids=["550-boxes", "tied-scores"])
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_over_500_per_image_scores_what_pycocotools_gives_the_raw_output(tied, backend):
    ground_truth, predictions = crowded_case(tied)
    assert len(predictions) > MAX_DETECTIONS
    reference = pycocotools_eval(ground_truth, predictions)
    scores = evaluate(ground_truth, through_sanitize(predictions, [1, 2]), backend=backend)
    assert scores.ap == pytest.approx(precision_ap(reference), abs=1e-9)
    for k, name in enumerate(("a", "b")):
        assert scores.per_class[name] == pytest.approx(precision_ap(reference, k), abs=1e-9)
    assert scores.per_class["b"] > 0.5  # a cap of 500 per image would have dropped every box of class b


def test_the_cap_is_per_class_and_keeps_input_order():
    scores = np.array([0.9] * 3 + [0.1] * 2 + [0.5])
    labels = np.array([0, 0, 0, 1, 1, 0])
    boxes = np.tile([[1.0, 1.0, 5.0, 5.0]], (6, 1))
    safe = sanitize_detections(boxes, scores, labels, 10, 10, max_detections=2)
    assert safe.truncated == 2  # the third 0.9 (a tie lost by input order) and the 0.5 of class 0
    np.testing.assert_array_equal(safe.labels, [0, 0, 1, 1])
    np.testing.assert_array_equal(safe.scores, [0.9, 0.9, 0.1, 0.1])


def test_swapped_corners_are_counted_and_clip_false_leaves_boxes_as_given():
    boxes = np.array([[8.0, 2.0, 3.0, 6.0], [1.0, 9.0, 4.0, 2.0], [-5.0, 1.0, 20.0, 4.0], [np.nan, 0, 1, 1]])
    clipped = sanitize_detections(boxes, np.ones(4), np.zeros(4), 10, 10)
    assert (clipped.swapped, clipped.non_finite) == (2, 1)
    np.testing.assert_array_equal(clipped.boxes, [[3, 2, 8, 6], [1, 2, 4, 9], [0, 1, 10, 4]])
    kept = sanitize_detections(boxes, np.ones(4), np.zeros(4), 10, 10, clip=False)
    assert (kept.swapped, kept.non_finite) == (0, 1)
    np.testing.assert_array_equal(kept.boxes, boxes[:3])


def test_per_class_rows_carry_ap50_and_instances_as_pycocotools_counts_them():
    from tests.support.coco_reference import noisy_predictions, synthetic_ground_truth

    rng = np.random.default_rng(2)
    ground_truth = synthetic_ground_truth(rng, n_images=10, boxes_per_image=4, category_ids=[3, 1, 2])
    predictions = noisy_predictions(rng, ground_truth)
    reference = pycocotools_eval(ground_truth, predictions)
    rows = evaluate(ground_truth, predictions).class_rows()
    assert [row["class"] for row in rows] == ["class-1", "class-2", "class-3"]
    for k, row in enumerate(rows):
        ap50 = reference.eval["precision"][0, :, k, 0, -1]
        expected = 100 * ap50[ap50 > -1].mean() if (ap50 > -1).any() else None
        assert row["ap50"] == (pytest.approx(expected, abs=1e-7) if expected is not None else None)
        category = int(reference.params.catIds[k])
        n_gt = sum(not a["iscrowd"] for a in ground_truth["annotations"] if a["category_id"] == category)
        assert row["n_instances"] == n_gt
