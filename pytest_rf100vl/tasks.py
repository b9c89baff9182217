"""What an adapter is told about a dataset: classes, and per prompt mode the annotator
instructions or the few-shot examples; for UOUO, the question asked about each mosaic;
ground truth only for adapters that declare they need it (the oracle), so no real model
can see the answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rf100vl_hf.boxes import xywh_to_xyxy
from rf100vl_hf.images import open_rgb

from pytest_rf100vl.adapters.base import Adapter, DetectionTask, Detections, FewShotExample, GroundingQuery

if TYPE_CHECKING:
    import datasets


def ground_truth(dataset: "datasets.Dataset") -> dict[int, Detections]:
    """Image id -> the split's boxes as detections (``xyxy``, score 1)."""
    out = {}
    for image_id, objects in zip(dataset["image_id"], dataset["objects"]):
        boxes = xywh_to_xyxy(np.asarray(objects["bbox"], dtype=np.float64))
        labels = np.asarray(objects["category"], dtype=np.int64)
        out[int(image_id)] = Detections(boxes, np.ones(len(labels)), labels)
    return out


def instruction_texts(metadata: dict[str, Any]) -> dict[str, str]:
    """Class -> its description and annotator instructions as one paragraph."""
    classes = metadata.get("instructions", {}).get("classes", {})
    return {
        name: " ".join(part for part in (entry.get("description"), entry.get("instructions")) if part)
        for name, entry in classes.items()
    }


def fewshot_examples(dataset: "datasets.Dataset") -> tuple[FewShotExample, ...]:
    """The annotated images of a few-shot split, decoded to RGB."""
    import datasets

    rows = dataset.select_columns(["image", "objects"]).cast_column("image", datasets.Image(decode=False))
    return tuple(
        FewShotExample(
            image=open_rgb(row["image"]["bytes"]),
            boxes=xywh_to_xyxy(np.asarray(row["objects"]["bbox"], dtype=np.float64)),
            labels=np.asarray(row["objects"]["category"], dtype=np.int64),
        )
        for row in rows
    )


def detection_task(
    adapter: Adapter,
    dataset: "datasets.Dataset",
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    load_split: Callable[[str], "datasets.Dataset"],
) -> DetectionTask:
    """The task for ``adapter`` on ``dataset``; ``load_split`` fetches the few-shot split when needed."""
    fewshot: tuple[FewShotExample, ...] = ()
    if prompt == "fewshot":
        fewshot = fewshot_examples(load_split(metadata["fewshot"]["split"]))
    return DetectionTask(
        dataset=metadata["name"],
        classes=list(metadata["classes"]),
        split=split,
        prompt=prompt,
        instructions=instruction_texts(metadata) if prompt in ("instructions", "fewshot") else {},
        fewshot=fewshot,
        category_ids=tuple(metadata["category_ids"]),
        ground_truth=ground_truth(dataset) if adapter.needs_ground_truth else None,
        image_ids=tuple(int(image_id) for image_id in dataset["image_id"]),
    )


def grounding_queries(dataset: "datasets.Dataset") -> list[GroundingQuery]:
    """The UOUO questions of each mosaic, in row order, exactly as the dataset stores them."""
    return [
        GroundingQuery(target=target, box_prompt=box, quadrant_prompt=quadrant)
        for target, box, quadrant in zip(dataset["target_category"], dataset["box_prompt"], dataset["quadrant_prompt"])
    ]


def grounding_task(adapter: Adapter, dataset: "datasets.Dataset", name: str) -> DetectionTask | None:
    """What an adapter that needs the ground truth is told about a UOUO dataset: every object
    of each mosaic (classes: the categories, in the order first met); ``None`` for any other
    adapter, which gets nothing but the mosaics and the questions."""
    if not adapter.needs_ground_truth:
        return None
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
