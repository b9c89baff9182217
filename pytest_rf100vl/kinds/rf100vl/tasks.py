"""What an adapter is told about an RF100-VL dataset: classes, and per prompt mode the
annotator instructions or the few-shot examples; the ground truth (:func:`ground_truth`) only
for adapters that declare they need it (the oracle), so no real model can see the answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rf100vl_hf.boxes import xywh_to_xyxy
from rf100vl_hf.images import open_rgb

from pytest_rf100vl.adapters.base import DetectionTask, Detections, FewShotExample

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
    dataset: "datasets.Dataset",
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    load_split: Callable[[str], "datasets.Dataset"],
) -> DetectionTask:
    """The task a detector is told about ``dataset``: its classes, and per prompt mode the
    annotator instructions or the few-shot examples (``load_split`` fetches a split by name:
    the few-shot split when needed); the image ids of the whole split ``split``, so a replayed
    file may hold images a limited run leaves out. No ground truth: only the oracle is given it."""
    fewshot: tuple[FewShotExample, ...] = ()
    if "fewshot" in prompt:
        examples = metadata.get("fewshot", {}).get("split")
        if examples is None:
            raise ValueError(f"prompt mode {prompt!r} shows the model the few-shot split, and dataset "
                             f"{metadata['name']!r} has none (no train split to draw it from, nor a few-shot export)")
        fewshot = fewshot_examples(load_split(examples))
    return DetectionTask(
        dataset=metadata["name"],
        classes=list(metadata["classes"]),
        split=split,
        prompt=prompt,
        instructions=instruction_texts(metadata) if prompt != "names" else {},
        fewshot=fewshot,
        category_ids=tuple(metadata["category_ids"]),
        image_ids=tuple(int(image_id) for image_id in dataset["image_id"]),
    )
