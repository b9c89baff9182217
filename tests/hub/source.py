"""What an exported split must hold, read straight from a Roboflow export on disk.

The expectations come from the annotation JSON and the image files, not from the reader or
the builder: image bytes as stored, image ids and boxes as written, class names through the
JSON's categories, and annotation ids numbered from 1 in file order (the protocol's
renumbering).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import datasets

SPLIT_FOLDERS = {"train": "train", "validation": "valid", "test": "test"}


def _annotations(export: Path, split: str) -> tuple[Path, dict[str, Any]]:
    folder = export / SPLIT_FOLDERS[split]
    return folder, json.loads((folder / "_annotations.coco.json").read_text(encoding="utf-8"))


def classes(export: Path) -> list[str]:
    """Class names in category-id order, without Roboflow's dataset-level category 0."""
    _, data = _annotations(export, "train")
    categories = sorted(data["categories"], key=lambda c: c["id"])
    return [c["name"] for c in categories if not (c["id"] == 0 and c.get("supercategory") == "none")]


def expected_rows(export: Path, split: str) -> list[dict[str, Any]]:
    """One row per image of the split's JSON, in file order."""
    folder, data = _annotations(export, split)
    names = {c["id"]: c["name"] for c in data["categories"]}
    by_image: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for number, ann in enumerate(data["annotations"], start=1):
        by_image[ann["image_id"]].append((number, ann))
    return [
        {
            "image": (folder / image["file_name"]).read_bytes(),
            "image_id": image["id"],
            "file_name": image["file_name"],
            "width": image["width"],
            "height": image["height"],
            "ids": [number for number, _ in by_image[image["id"]]],
            "bboxes": [[float(v) for v in ann["bbox"]] for _, ann in by_image[image["id"]]],
            "classes": [names[ann["category_id"]] for _, ann in by_image[image["id"]]],
            "areas": [float(ann["area"]) for _, ann in by_image[image["id"]]],
            "iscrowd": [ann.get("iscrowd", 0) for _, ann in by_image[image["id"]]],
        }
        for image in data["images"]
    ]


def actual_rows(dataset: datasets.Dataset) -> list[dict[str, Any]]:
    """The same view of a loaded split, images left as their stored bytes."""
    dataset = dataset.cast_column("image", datasets.Image(decode=False))
    label = dataset.features["objects"]["category"].feature
    return [
        {
            "image": row["image"]["bytes"],
            "image_id": row["image_id"],
            "file_name": row["file_name"],
            "width": row["width"],
            "height": row["height"],
            "ids": row["objects"]["id"],
            "bboxes": row["objects"]["bbox"],
            "classes": [label.int2str(c) for c in row["objects"]["category"]],
            "areas": row["objects"]["area"],
            "iscrowd": row["objects"]["iscrowd"],
        }
        for row in dataset
    ]


def assert_derived_from_train(rows: list[dict[str, Any]], export: Path) -> None:
    """A derived split (few-shot, semi-supervised): train images, unchanged, with a subset of their boxes."""
    train = {row["file_name"]: row for row in expected_rows(export, "train")}
    assert rows, "a derived split is empty"
    for row in rows:
        source = train[row["file_name"]]
        assert row["image"] == source["image"]
        assert (row["image_id"], row["width"], row["height"]) == (source["image_id"], source["width"], source["height"])
        source_boxes = list(zip(source["bboxes"], source["classes"]))
        for box in zip(row["bboxes"], row["classes"]):
            assert box in source_boxes, f"{row['file_name']}: {box} is not a train box of the image"
    assert [i for row in rows for i in row["ids"]] == list(range(1, 1 + sum(len(r["ids"]) for r in rows)))
