"""Each backend's whole precision and recall arrays against pycocotools used directly, cell by
cell, on inputs that exercise every rule of COCOeval's matching and accumulation: crowd boxes,
the four area ranges, tied scores (broken by image, then by input order), more than 500
detections in one image and class (maxDets truncation), images with no box or no detection,
and category ids out of order."""

from __future__ import annotations

import numpy as np
import pytest

from rf100vl_hf.metrics import BACKENDS
from rf100vl_hf.metrics.inputs import check_ground_truth, check_results

from tests.support.coco_reference import noisy_predictions, pycocotools_eval, synthetic_ground_truth

FASTER_TOLERANCE = 1e-12
"""faster-coco-eval divides by tp + fp where pycocotools divides by tp + fp + eps: where a curve
starts with a single true positive, its precision is 1.0 and pycocotools' 1 - 2.2e-16."""


def _tied(rng: np.random.Generator) -> tuple[dict, list[dict]]:
    """Scores to one decimal: most detections tie with others of their class."""
    ground_truth = synthetic_ground_truth(rng, n_images=30, boxes_per_image=6, category_ids=[4, 2, 9, 1],
                                          crowd_fraction=0.15)
    predictions = noisy_predictions(rng, ground_truth, false_per_image=12)
    return ground_truth, [dict(p, score=round(p["score"], 1)) for p in predictions]


def _over_500(rng: np.random.Generator) -> tuple[dict, list[dict]]:
    """Two images, each with 700 false positives of one class (scores to two decimals, so many tie)
    and up to 120 boxes found with higher scores: only the best 500 of each image count."""
    ground_truth = synthetic_ground_truth(rng, n_images=2, boxes_per_image=60, category_ids=[1, 2])
    predictions = [dict(p, category_id=1, score=0.5 + p["score"] / 2)
                   for p in noisy_predictions(rng, ground_truth, false_per_image=0)]
    for image in ground_truth["images"]:
        for x, y, w, h, score in zip(*rng.uniform(0, 1, (5, 700))):
            predictions.append({"image_id": image["id"], "category_id": 1, "score": round(float(score) / 2, 2),
                                "bbox": [x * image["width"] / 2, y * image["height"] / 2, 4 + w * 300, 4 + h * 300]})
    return ground_truth, predictions


def _sparse(rng: np.random.Generator) -> tuple[dict, list[dict]]:
    """Many classes, few boxes: most images and classes have a box or a detection, not both."""
    ground_truth = synthetic_ground_truth(rng, n_images=25, boxes_per_image=2, category_ids=list(range(12, 0, -1)),
                                          crowd_fraction=0.1)
    return ground_truth, noisy_predictions(rng, ground_truth, false_per_image=8)


CASES = {"tied scores": _tied, "over 500 in one image and class": _over_500, "sparse": _sparse}


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("case", list(CASES))
def test_arrays_are_pycocotools_arrays(case: str, backend: str) -> None:
    ground_truth, predictions = CASES[case](np.random.default_rng(13))
    reference = pycocotools_eval(ground_truth, predictions).eval
    gt = check_ground_truth(ground_truth, None)
    arrays = BACKENDS[backend](gt, check_results(predictions, gt))

    assert arrays["precision"].shape == reference["precision"].shape
    assert 0.05 < reference["precision"][reference["precision"] > -1].mean() < 0.95  # a curve, not a corner
    if backend != "faster-coco-eval":  # pycocotools itself, and hotcoco's exact port
        np.testing.assert_array_equal(arrays["precision"], reference["precision"])
    else:
        np.testing.assert_allclose(arrays["precision"], reference["precision"], rtol=0, atol=FASTER_TOLERANCE)
        np.testing.assert_array_equal(arrays["precision"] == -1, reference["precision"] == -1)
    np.testing.assert_array_equal(arrays["recall"], reference["recall"])
