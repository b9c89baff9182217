"""What an adapter is told about an RF100-VL dataset: classes, and per prompt mode the
annotator instructions or the few-shot examples; the ground truth (:func:`ground_truth`) only
for adapters that declare they need it (the oracle), so no real model can see the answers. Under
a protocol that prompts category 0 (``rf-scripts``), the export's category 0 comes first among
the classes of a zero-shot ``names`` task, as Roboflow's scripts list it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rf100vl_hf.arrow import arrow_columns
from rf100vl_hf.boxes import xywh_to_xyxy
from rf100vl_hf.images import open_rgb

from pytest_rf100vl.adapters.base import Detections, DetectionTask, FewShotExample

if TYPE_CHECKING:
    import datasets


def ground_truth(dataset: "datasets.Dataset", offset: int = 0) -> dict[int, Detections]:
    """Image id -> the split's boxes as detections (``xyxy``, score 1), labels ``offset`` past
    the dataset's class indices (1 when category 0 is prompted first)."""
    out = {}
    table = arrow_columns(dataset, ["image_id", "objects"])
    for image_id, objects in zip(table.column("image_id").to_pylist(), table.column("objects").to_pylist()):
        boxes = xywh_to_xyxy(np.asarray(objects["bbox"], dtype=np.float64))
        labels = np.asarray(objects["category"], dtype=np.int64) + offset
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
    return tuple(
        FewShotExample(
            image=open_rgb(row["image"]["bytes"]),
            boxes=xywh_to_xyxy(np.asarray(row["objects"]["bbox"], dtype=np.float64)),
            labels=np.asarray(row["objects"]["category"], dtype=np.int64),
        )
        for row in arrow_columns(dataset, ["image", "objects"]).to_pylist()
    )


def prompted_classes(metadata: dict[str, Any], prompt: str, category_zero: bool) -> tuple[list[str], tuple[int, ...]]:
    """The classes a model is asked about, with their category ids: the dataset's, led by the
    export's category 0 (its supercategory: Roboflow's scripts prompt every category of the
    annotation file) when ``category_zero`` and the prompt is ``names`` and the export has one."""
    classes, ids = list(metadata["classes"]), tuple(metadata["category_ids"])
    zero = metadata.get("supercategory")
    if category_zero and prompt == "names" and zero is not None:
        return [zero, *classes], (0, *ids)
    return classes, ids


def detection_task(
    dataset: "datasets.Dataset",
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    load_split: Callable[[str], "datasets.Dataset"],
    category_zero: bool = False,
) -> DetectionTask:
    """The task a detector is told about ``dataset``: its classes, and per prompt mode the
    annotator instructions or the few-shot examples (``load_split`` fetches a split by name:
    the few-shot split when needed); the image ids of the whole split ``split``, so a replayed
    file may hold images a limited run leaves out. No ground truth: only the oracle is given it.
    ``category_zero``: the protocol prompts category 0 (:func:`prompted_classes`)."""
    fewshot: tuple[FewShotExample, ...] = ()
    if "fewshot" in prompt:
        examples = metadata.get("fewshot", {}).get("split")
        if examples is None:
            raise ValueError(f"prompt mode {prompt!r} shows the model the few-shot split, and dataset "
                             f"{metadata['name']!r} has none (no train split to draw it from, nor a few-shot export)")
        fewshot = fewshot_examples(load_split(examples))
    classes, category_ids = prompted_classes(metadata, prompt, category_zero)
    return DetectionTask(
        dataset=metadata["name"],
        classes=classes,
        split=split,
        prompt=prompt,
        instructions=instruction_texts(metadata) if prompt != "names" else {},
        readme=(metadata.get("instructions", {}).get("raw") or "") if "instructions" in prompt else "",
        fewshot=fewshot,
        category_ids=category_ids,
        image_ids=tuple(arrow_columns(dataset, ["image_id"]).column(0).to_pylist()),
    )
