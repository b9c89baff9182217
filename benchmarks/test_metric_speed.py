"""Speed of the COCO metric against the obvious alternatives, measured in the same run.

- ``evaluate`` (faster-coco-eval backend, from COCO dicts to ``CocoScores``) against plain
  pycocotools (COCO + loadRes + evaluate + accumulate + reading the precision array) on
  1,000 images x 20 ground-truth boxes x 300 detections; target: at least 3x faster.
- ``coco_ground_truth`` on a 2,000-image split against iterating its rows, which decodes
  every image.

Run with ``pytest benchmarks/test_metric_speed.py -s`` to see the ratios.
"""

from __future__ import annotations

import contextlib
import copy
import io
import time
from typing import Any

import numpy as np
import pytest

from rf100vl_hf.metrics import coco_ground_truth, evaluate

N_IMAGES, GT_PER_IMAGE, DETECTIONS_PER_IMAGE, N_CLASSES = 1000, 20, 300, 10
MIN_SPEEDUP = 3.0


def _xywh(rng: np.random.Generator, n: int, width: float, height: float) -> np.ndarray:
    size = rng.uniform([8, 8], [width / 4, height / 4], (n, 2))
    corner = rng.uniform(0, 1, (n, 2)) * ([width, height] - size)
    return np.concatenate([corner, size], axis=1)


def _detection_case(seed: int = 0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Each ground-truth box found once, jittered, plus random boxes up to 300 per image."""
    rng = np.random.default_rng(seed)
    images, annotations, predictions = [], [], []
    for image_id in range(1, N_IMAGES + 1):
        images.append({"id": image_id, "width": 1024, "height": 768})
        boxes = _xywh(rng, GT_PER_IMAGE, 1024, 768)
        classes = rng.integers(1, N_CLASSES + 1, GT_PER_IMAGE)
        for box, cls in zip(boxes.tolist(), classes.tolist()):
            annotations.append({"id": len(annotations) + 1, "image_id": image_id, "category_id": cls, "bbox": box,
                                "area": box[2] * box[3], "iscrowd": 0})
        found = boxes + rng.normal(0, 0.05, boxes.shape) * boxes[:, [2, 3, 2, 3]]
        noise = _xywh(rng, DETECTIONS_PER_IMAGE - GT_PER_IMAGE, 1024, 768)
        labels = np.concatenate([classes, rng.integers(1, N_CLASSES + 1, len(noise))])
        scores = rng.random(DETECTIONS_PER_IMAGE)
        for box, cls, score in zip(np.concatenate([found, noise]).tolist(), labels.tolist(), scores.tolist()):
            predictions.append({"image_id": image_id, "category_id": cls, "bbox": box, "score": score})
    categories = [{"id": c, "name": f"class-{c}"} for c in range(1, N_CLASSES + 1)]
    return {"images": images, "annotations": annotations, "categories": categories}, predictions


def _plain_pycocotools(ground_truth: dict[str, Any], predictions: list[dict[str, Any]]) -> float:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = ground_truth
        coco.createIndex()
        evaluator = COCOeval(coco, coco.loadRes(predictions), "bbox")
        evaluator.params.maxDets = [1, 10, 500]
        evaluator.evaluate()
        evaluator.accumulate()
    precision = evaluator.eval["precision"][:, :, :, 0, -1]
    return float(precision[precision > -1].mean())


def _report(benchmark: Any, what: str, ours: float, alternative: float, name: str) -> float:
    ratio = alternative / ours
    benchmark.extra_info.update({"alternative": name, "alternative_s": alternative, "speedup": ratio})
    print(f"\n{what}: ours {ours:.2f} s, {name} {alternative:.2f} s, {ratio:.1f}x faster")
    return ratio


def test_evaluate_against_plain_pycocotools(benchmark):
    ground_truth, predictions = _detection_case()
    # pycocotools writes into its inputs: give it copies, made outside its clock
    gt_copy, predictions_copy = copy.deepcopy(ground_truth), copy.deepcopy(predictions)
    start = time.perf_counter()
    reference_ap = _plain_pycocotools(gt_copy, predictions_copy)
    alternative = time.perf_counter() - start

    scores = benchmark.pedantic(evaluate, args=(ground_truth, predictions), rounds=3, iterations=1)

    assert scores.n_predictions == N_IMAGES * DETECTIONS_PER_IMAGE
    assert scores.ap == pytest.approx(reference_ap, abs=1e-12)
    ratio = _report(benchmark, "COCO AP end to end", benchmark.stats.stats.median, alternative, "plain pycocotools")
    assert ratio >= MIN_SPEEDUP


def test_ground_truth_against_iterating_rows(benchmark):
    import datasets
    from PIL import Image

    from rf100vl_hf.rf100vl.builder import features

    buffer = io.BytesIO()
    Image.new("RGB", (320, 240), (120, 80, 40)).save(buffer, format="JPEG")
    objects = {"id": list(range(1, 21)), "bbox": [[1.0, 2.0, 30.0, 40.0]] * 20, "category": [0] * 20,
               "area": [1200.0] * 20, "iscrowd": [0] * 20}
    rows = [{"image": {"bytes": buffer.getvalue(), "path": f"{i}.jpg"}, "image_id": i, "file_name": f"{i}.jpg",
             "width": 320, "height": 240, "objects": objects} for i in range(2000)]
    split = datasets.Dataset.from_list(rows, features=features(["thing"]))

    start = time.perf_counter()
    naive = sum(len(row["objects"]["id"]) for row in split)  # what a loop over the rows costs
    alternative = time.perf_counter() - start

    ground_truth = benchmark.pedantic(coco_ground_truth, args=(split,), rounds=3, iterations=1)

    assert len(ground_truth["annotations"]) == naive == 40_000
    _report(benchmark, "ground truth of 2,000 images", benchmark.stats.stats.median, alternative, "iterating rows")
