"""What an adapter is told about a UOUO dataset: the question asked about each mosaic, and the
ground truth only for adapters that declare they need it (the oracle)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pytest_rf100vl.adapters.base import Detections, DetectionTask, GroundingQuery

if TYPE_CHECKING:
    import datasets


def grounding_queries(dataset: "datasets.Dataset") -> list[GroundingQuery]:
    """The UOUO questions of each mosaic, in row order, exactly as the dataset stores them."""
    return [
        GroundingQuery(target=target, box_prompt=box, quadrant_prompt=quadrant)
        for target, box, quadrant in zip(dataset["target_category"], dataset["box_prompt"], dataset["quadrant_prompt"])
    ]


def oracle_task(dataset: "datasets.Dataset", name: str) -> DetectionTask:
    """What an adapter that needs the ground truth (the oracle) is told about a UOUO dataset:
    every object of each mosaic (classes: the categories, in the order first met). Any other
    adapter gets nothing but the mosaics and the questions."""
    mosaics = dataset.select_columns(["mosaic_id", "objects"])
    classes: dict[str, int] = {}
    truth = {}
    for mosaic_id, objects in zip(mosaics["mosaic_id"], mosaics["objects"]):
        labels = [classes.setdefault(category, len(classes)) for category in objects["category"]]
        boxes = np.asarray(objects["box"], dtype=np.float64).reshape(-1, 4)
        truth[int(mosaic_id)] = Detections(boxes, np.ones(len(labels)), np.asarray(labels, dtype=np.int64))
    return DetectionTask(
        dataset=name, classes=list(classes), ground_truth=truth, image_ids=tuple(int(i) for i in mosaics["mosaic_id"])
    )
