"""Copy real or generated exports into a temporary folder and edit their annotation files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from rf100vl_hf.rf100vl.reader import ANNOTATIONS_FILE

FOLDERS = {"train": "train", "validation": "valid", "test": "test"}  # split name -> folder, as exported


def share_file(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` where the file system allows it, else a copy.

    Not a symbolic link: the reader refuses files that link outside their export.
    """
    try:
        os.link(src.resolve(), dst)
    except OSError:
        shutil.copyfile(src, dst)


def copy_export(src: Path, dst: Path, link_images: bool = False) -> Path:
    """A writable copy of ``src`` (the shared data is read-only, and copytree would keep that).

    With ``link_images`` the images are shared with the originals (see :func:`share_file`):
    enough for tests that only edit annotation files.
    """
    for path in sorted(src.rglob("*")):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if link_images and path.name != ANNOTATIONS_FILE and not path.name.startswith("README"):
            share_file(path, target)
        else:
            shutil.copyfile(path, target)
    return dst


def annotation_file(root: Path, folder: str = "train") -> Path:
    return root / folder / ANNOTATIONS_FILE


def load(root: Path, folder: str = "train") -> dict[str, Any]:
    return json.loads(annotation_file(root, folder).read_text(encoding="utf-8"))


def save(root: Path, folder: str, data: dict[str, Any]) -> None:
    annotation_file(root, folder).write_text(json.dumps(data), encoding="utf-8")


def edit(root: Path, change: Callable[[dict[str, Any]], Any], folders: tuple[str, ...] = ("train",)) -> None:
    """Apply ``change`` to the annotation file of each folder in place."""
    for folder in folders:
        data = load(root, folder)
        change(data)
        save(root, folder, data)


def expected_rows(root: Path, folder: str) -> list[dict[str, Any]]:
    """What a split should hold, straight from the JSON file and the image files on disk.

    Annotation ids are the 1-based position in the file's annotation list; boxes, areas
    and crowd flags are as written; categories are named through the file's own list.
    """
    data = load(root, folder)
    names = {c["id"]: c["name"] for c in data["categories"]}
    rows = {
        image["id"]: {
            "image_id": image["id"],
            "file_name": image["file_name"],
            "width": image["width"],
            "height": image["height"],
            "bytes": (root / folder / image["file_name"]).read_bytes(),
            "objects": {"id": [], "bbox": [], "category": [], "area": [], "iscrowd": []},
        }
        for image in data["images"]
    }
    for position, ann in enumerate(data["annotations"], start=1):
        objects = rows[ann["image_id"]]["objects"]
        objects["id"].append(position)
        objects["bbox"].append([float(v) for v in ann["bbox"]])
        objects["category"].append(names[ann["category_id"]])
        objects["area"].append(float(ann["area"]))
        objects["iscrowd"].append(ann["iscrowd"])
    return list(rows.values())
