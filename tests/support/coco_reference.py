"""The reference the metric is checked against: pycocotools used directly, as the benchmark's
public code uses it, plus generated ground truth and predictions to feed both."""

from __future__ import annotations

import contextlib
import copy
import io
from typing import Any

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def pycocotools_eval(
    ground_truth: dict[str, Any], predictions: list[dict[str, Any]], max_dets: tuple[int, ...] = (1, 10, 500)
) -> COCOeval:
    """COCO() + loadRes + COCOeval(bbox) with the given maxDets, evaluated and accumulated."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(ground_truth)
        coco.createIndex()
        evaluator = COCOeval(coco, coco.loadRes(copy.deepcopy(predictions)), "bbox")
        evaluator.params.maxDets = list(max_dets)
        evaluator.evaluate()
        evaluator.accumulate()
    return evaluator


def precision_ap(evaluator: COCOeval, category: int | None = None) -> float:
    """AP50:95 from the precision array at area "all" and the last maxDets, mean over defined cells."""
    precision = evaluator.eval["precision"][:, :, :, 0, -1]
    if category is not None:
        precision = precision[:, :, category]
    defined = precision[precision > -1]
    return float(defined.mean()) if defined.size else float("nan")


def summarize(evaluator: COCOeval) -> np.ndarray:
    """pycocotools' own 12 summary numbers (quietly)."""
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator.summarize()
    return evaluator.stats


def synthetic_ground_truth(
    rng: np.random.Generator,
    n_images: int,
    boxes_per_image: int,
    category_ids: list[int],
    crowd_fraction: float = 0.05,
) -> dict[str, Any]:
    """Images of random sizes holding boxes of every COCO size range, a few of them crowd.

    The last category gets no box, so per-class AP must report it as undefined.
    """
    images, annotations = [], []
    for image_id in range(1, n_images + 1):
        width, height = int(rng.integers(320, 1024)), int(rng.integers(240, 768))
        images.append({"id": image_id, "width": width, "height": height, "file_name": f"{image_id}.jpg"})
        for _ in range(int(rng.integers(0, 2 * boxes_per_image + 1))):
            w = float(np.exp(rng.uniform(np.log(4), np.log(width / 2))))
            h = float(np.exp(rng.uniform(np.log(4), np.log(height / 2))))
            x, y = float(rng.uniform(0, width - w)), float(rng.uniform(0, height - h))
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": int(rng.choice(category_ids[:-1])),
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": int(rng.random() < crowd_fraction),
                }
            )
    categories = [{"id": c, "name": f"class-{c}"} for c in category_ids]
    return {"images": images, "annotations": annotations, "categories": categories}


def noisy_predictions(
    rng: np.random.Generator, ground_truth: dict[str, Any], jitter: float = 0.1, false_per_image: int = 5
) -> list[dict[str, Any]]:
    """A plausible detector: each box found with probability 0.8, shifted by ``jitter`` of its
    size, sometimes with the wrong class, plus false positives on every image (some in the
    class that has no ground truth); scores are random."""
    category_ids = [c["id"] for c in ground_truth["categories"]]
    predictions = []
    for ann in ground_truth["annotations"]:
        if rng.random() < 0.8:
            x, y, w, h = ann["bbox"]
            dx, dy, dw, dh = rng.normal(0, jitter, 4) * [w, h, w, h]
            category = ann["category_id"] if rng.random() < 0.9 else int(rng.choice(category_ids))
            predictions.append(
                {
                    "image_id": ann["image_id"],
                    "category_id": category,
                    "bbox": [x + dx, y + dy, max(w + dw, 1.0), max(h + dh, 1.0)],
                    "score": float(rng.random()),
                }
            )
    for image in ground_truth["images"]:
        for _ in range(false_per_image):
            w, h = float(rng.uniform(2, image["width"] / 3)), float(rng.uniform(2, image["height"] / 3))
            predictions.append(
                {
                    "image_id": image["id"],
                    "category_id": int(rng.choice(category_ids)),
                    "bbox": [float(rng.uniform(0, image["width"] - w)), float(rng.uniform(0, image["height"] - h)),
                             w, h],
                    "score": float(rng.random()),
                }
            )
    return predictions


def perfect_predictions(ground_truth: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ground-truth box, in its class, with score 1."""
    return [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": list(a["bbox"]), "score": 1.0}
        for a in ground_truth["annotations"]
    ]
