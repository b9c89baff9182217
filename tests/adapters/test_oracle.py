"""The oracle returns the ground truth, and pycocotools scores it AP 1.0 on a real export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pytest_rf100vl.adapters import Detections, DetectionTask, ImageItem, create

from tests.support.coco_reference import precision_ap, pycocotools_eval


def export_task(annotations: Path) -> tuple[DetectionTask, list[ImageItem], dict]:
    """Classes (category 0 left out), ground truth by image id and the images of a raw export."""
    coco = json.loads(annotations.read_text())
    categories = [c for c in coco["categories"] if c["supercategory"] != "none"]
    index = {c["id"]: i for i, c in enumerate(categories)}
    truth = {}
    for image in coco["images"]:
        anns = [a for a in coco["annotations"] if a["image_id"] == image["id"]]
        xywh = np.array([a["bbox"] for a in anns], dtype=np.float64).reshape(-1, 4)
        boxes = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
        truth[image["id"]] = Detections(boxes, np.ones(len(anns)), np.array([index[a["category_id"]] for a in anns]))
    task = DetectionTask(
        "chess-pieces",
        [c["name"] for c in categories],
        category_ids=tuple(c["id"] for c in categories),
        ground_truth=truth,
    )
    items = [
        ImageItem(Image.new("RGB", (im["width"], im["height"])), im["id"], im["file_name"]) for im in coco["images"]
    ]
    return task, items, coco


def coco_ap(coco: dict, results: list[dict]) -> float:
    """AP50:95 at maxDets=500 with pycocotools, the metric of RF100-VL (annotation ids from 1)."""
    gt = dict(coco, annotations=[dict(a, id=i + 1) for i, a in enumerate(coco["annotations"])])
    return precision_ap(pycocotools_eval(gt, results))


def test_oracle_scores_exactly_one_on_a_real_export(shared_data: Path) -> None:
    task, items, coco = export_task(shared_data / "chess-pieces" / "test" / "_annotations.coco.json")
    oracle = create("oracle")
    assert oracle.needs_ground_truth
    oracle.set_task(task)
    out = oracle.predict(items)
    results = []
    for item, detections in zip(items, out):
        detections.check(len(task.classes))
        truth = task.ground_truth[item.image_id]
        np.testing.assert_array_equal(detections.boxes, truth.boxes)
        np.testing.assert_array_equal(detections.labels, truth.labels)
        assert np.all(detections.scores == 1.0)
        for (x0, y0, x1, y1), label in zip(detections.boxes.tolist(), detections.labels.tolist()):
            results.append(
                {
                    "image_id": item.image_id,
                    "category_id": task.category_ids[label],
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "score": 1.0,
                }
            )
    assert any(len(d.scores) == 0 for d in out)  # the export's test image with no boxes
    assert coco_ap(coco, results) == 1.0


def test_an_image_missing_from_the_ground_truth_has_no_boxes() -> None:
    oracle = create("oracle")
    oracle.set_task(DetectionTask("toy", ["a"], ground_truth={}))
    (detections,) = oracle.predict([ImageItem(Image.new("RGB", (4, 4)), 7, "7.jpg")])
    assert len(detections.scores) == 0


def test_oracle_refuses_a_task_without_ground_truth() -> None:
    with pytest.raises(ValueError, match="needs the ground truth of 'toy'"):
        create("oracle").set_task(DetectionTask("toy", ["a"]))
