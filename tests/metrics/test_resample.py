"""AP of resampled images: with each image once it is pycocotools' AP, and with any number of
copies of each image it is what pycocotools gives on the resampled split built image by image,
ties of scores (inside one image, and across images) included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rf100vl_hf.metrics import evaluate
from rf100vl_hf.metrics.resample import IGNORED, MATCHED, UNMATCHED, match_images

from tests.support.coco_reference import noisy_predictions, precision_ap, pycocotools_eval, synthetic_ground_truth

N_IMAGES = 40


@pytest.fixture(scope="module")
def case() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A split with crowd boxes and a class without boxes; scores rounded, so that many tie."""
    rng = np.random.default_rng(7)
    truth = synthetic_ground_truth(rng, N_IMAGES, 4, [3, 5, 8, 9])
    predictions = noisy_predictions(rng, truth, jitter=0.03)
    for record in predictions:
        record["score"] = round(record["score"], 1)
    return truth, predictions


def materialised(truth: dict[str, Any], predictions: list[dict[str, Any]], counts: np.ndarray,
                 image_ids: tuple[int, ...]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The resampled split written out: ``counts[i]`` copies of image ``i``, each with an id of
    its own, in the split's order."""
    images = {image["id"]: image for image in truth["images"]}
    copies: dict[int, list[int]] = {}
    out_images = []
    for image_id, count in zip(image_ids, counts):
        for _ in range(count):
            out_images.append({**images[image_id], "id": len(out_images) + 1})
            copies.setdefault(image_id, []).append(len(out_images))
    annotations = [{**ann, "id": number, "image_id": copy}
                   for number, (ann, copy) in enumerate(
                       ((ann, copy) for ann in truth["annotations"] for copy in copies.get(ann["image_id"], [])),
                       start=1)]
    records = [{**record, "image_id": copy} for record in predictions for copy in copies.get(record["image_id"], [])]
    return {**truth, "images": out_images, "annotations": annotations}, records


def test_each_image_once_is_pycocotools_ap(case) -> None:
    truth, predictions = case
    matches = match_images(truth, predictions)
    reference = precision_ap(pycocotools_eval(truth, predictions))
    assert 0.05 < reference < 0.95
    assert matches.ap() == pytest.approx(reference, abs=1e-12)
    assert matches.ap() == pytest.approx(evaluate(truth, predictions).ap, abs=1e-12)
    assert matches.image_ids == tuple(sorted(image["id"] for image in truth["images"]))


def test_a_resample_scores_what_pycocotools_gives_on_the_resampled_images(case) -> None:
    truth, predictions = case
    matches = match_images(truth, predictions)
    rng = np.random.default_rng(0)
    values = []
    for _ in range(4):
        counts = np.bincount(rng.integers(0, N_IMAGES, N_IMAGES), minlength=N_IMAGES)
        assert counts.max() > 1 and (counts == 0).any()
        resampled_truth, resampled = materialised(truth, predictions, counts, matches.image_ids)
        values.append(matches.ap(counts))
        assert values[-1] == pytest.approx(precision_ap(pycocotools_eval(resampled_truth, resampled)), abs=1e-12)
    assert len(set(values)) == len(values)  # the draws differ, and so do their scores


def test_a_class_absent_from_the_drawn_images_is_left_out_of_the_mean_as_pycocotools_leaves_it() -> None:
    truth = {"images": [{"id": 1, "width": 100, "height": 100}, {"id": 2, "width": 100, "height": 100}],
             "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 30, 30], "area": 900},
                             {"id": 2, "image_id": 2, "category_id": 2, "bbox": [50, 50, 20, 20], "area": 400}],
             "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    predictions = [{"image_id": 1, "category_id": 1, "bbox": [10, 10, 30, 30], "score": 0.9},
                   {"image_id": 2, "category_id": 2, "bbox": [0, 0, 10, 10], "score": 0.8}]
    matches = match_images(truth, predictions)
    assert matches.ap() == pytest.approx(0.5)  # class a found, class b missed
    assert matches.ap(np.array([2, 0])) == pytest.approx(1.0)  # class b undefined without image 2
    assert matches.ap(np.array([0, 2])) == pytest.approx(0.0)
    assert matches.outcomes == {0: MATCHED, 1: UNMATCHED}


def test_outcomes_at_iou_half_follow_pycocotools_matching() -> None:
    truth = {"images": [{"id": 4, "width": 200, "height": 200}],
             "annotations": [{"id": 1, "image_id": 4, "category_id": 1, "bbox": [10, 10, 50, 50], "area": 2500},
                             {"id": 2, "image_id": 4, "category_id": 1, "bbox": [120, 120, 60, 60], "area": 3600,
                              "iscrowd": 1}],
             "categories": [{"id": 1, "name": "a"}]}
    predictions = [{"image_id": 4, "category_id": 1, "bbox": [12, 12, 50, 50], "score": 0.9},  # IoU 0.8
                   {"image_id": 4, "category_id": 1, "bbox": [10, 10, 50, 50], "score": 0.5},  # box already taken
                   {"image_id": 4, "category_id": 1, "bbox": [125, 125, 40, 40], "score": 0.7}]  # inside the crowd
    assert match_images(truth, predictions).outcomes == {0: MATCHED, 1: UNMATCHED, 2: IGNORED}


def test_no_predictions_score_zero_on_every_resample(case) -> None:
    truth, _ = case
    matches = match_images(truth, [])
    assert matches.ap() == 0.0 and matches.ap(np.arange(N_IMAGES) % 3) == 0.0
