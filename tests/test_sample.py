"""The embedded sample: every quirk it claims is in the written files, and the reader needs no repair."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image, ImageOps

from rf100vl_hf.rf100vl.instructions import parse_instructions
from rf100vl_hf.rf100vl.reader import NotScorableWarning, RepairWarning, read_export
from rf100vl_hf.sample import CLASSES, COLORS, QUIRKS, ensure_sample, write_sample_export

FOLDERS = ("train", "valid", "test")


def _json(root: Path, folder: str) -> dict:
    return json.loads((root / folder / "_annotations.coco.json").read_text(encoding="utf-8"))


def _all(root: Path) -> list[tuple[str, dict]]:
    return [(folder, _json(root, folder)) for folder in FOLDERS]


def _boxes(data: dict) -> list[list[float]]:
    return [a["bbox"] for a in data["annotations"]]


def _opened(root: Path, folder: str, data: dict) -> list[tuple[dict, Image.Image]]:
    """Each image entry with its file opened from memory (no file handle left open)."""
    files = [(entry, (root / folder / entry["file_name"]).read_bytes()) for entry in data["images"]]
    return [(entry, Image.open(io.BytesIO(blob))) for entry, blob in files]


def _is_class_colour(pixel: np.ndarray) -> bool:
    return any(np.abs(pixel.astype(int) - colour).max() < 40 for colour in COLORS.values())


def _category_0(root: Path) -> bool:
    for _, data in _all(root):
        zero = next(c for c in data["categories"] if c["id"] == 0)
        others = [c for c in data["categories"] if c["id"] != 0]
        if zero["supercategory"] != "none" or any(c["supercategory"] != zero["name"] for c in others):
            return False
        if any(a["category_id"] == 0 for a in data["annotations"]):
            return False
    return True


def _polygons(root: Path) -> bool:
    for _, data in _all(root):
        for ann in data["annotations"]:
            x, y, w, h = ann["bbox"]
            (polygon,) = ann["segmentation"]
            xs, ys = polygon[0::2], polygon[1::2]
            if (min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)) != (x, y, w, h) or ann["area"] != w * h:
                return False
    return True


def _class_absent(root: Path) -> bool:
    present = {folder: {a["category_id"] for a in data["annotations"]} for folder, data in _all(root)}
    everywhere = set.union(*present.values())
    return any(everywhere - ids for ids in present.values())


def _modes(root: Path) -> bool:
    wanted = {"L", "I;16", "P", "RGBA", "CMYK", "RGB"}
    return all(wanted <= {im.mode for _, im in _opened(root, folder, data)} for folder, data in _all(root))


def _formats(root: Path) -> bool:
    return {im.format for folder, data in _all(root) for _, im in _opened(root, folder, data)} == {"JPEG", "PNG"}


def _exif(root: Path) -> bool:
    """A turned JPEG whose JSON size and boxes describe the displayed frame: the shapes are where the boxes are."""
    for folder, data in _all(root):
        for image, im in _opened(root, folder, data):
            if im.getexif().get(0x0112) != 6:
                continue
            shown = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
            boxes = [a["bbox"] for a in data["annotations"] if a["image_id"] == image["id"]]
            return (
                im.size == (image["height"], image["width"])
                and shown.shape[:2] == (image["height"], image["width"])
                and bool(boxes)
                and all(_is_class_colour(shown[int(y + h / 2), int(x + w / 2)]) for x, y, w, h in boxes)
            )
    return False


def _stems(root: Path) -> bool:
    for _, data in _all(root):
        stems = [image["file_name"].split(".rf.")[0] for image in data["images"]]
        if len(set(stems)) == len(stems):
            return False
    return True


def _near_duplicate(root: Path) -> bool:
    """Two images of the split whose pixels are mirror images of each other (within JPEG noise)."""
    for folder, data in _all(root):
        opened = _opened(root, folder, data)
        shown = [np.asarray(ImageOps.exif_transpose(im).convert("RGB")).astype(int) for _, im in opened]
        pairs = [(a, b) for i, a in enumerate(shown) for b in shown[i + 1 :] if a.shape == b.shape]
        if not any(np.abs(a[:, ::-1] - b).mean() < 6 for a, b in pairs):
            return False
    return True


def _instructions(root: Path) -> bool:
    parsed = parse_instructions((root / "README.dataset.txt").read_text(encoding="utf-8"))
    complete = all(c.description and c.instructions for c in parsed.classes.values())
    return list(parsed.classes) == list(CLASSES) and complete


QUIRK_CHECKS: dict[str, Callable[[Path], bool]] = {
    "category-0-supercategory": _category_0,
    "long-category-0-name": lambda root: all(len(d["categories"][0]["name"]) == 140 for _, d in _all(root)),
    "ids-from-0": lambda root: all(
        min(i["id"] for i in d["images"]) == 0 == min(a["id"] for a in d["annotations"]) for _, d in _all(root)
    ),
    "integer-and-float-boxes": lambda root: any(
        all(isinstance(v, int) for v in b) for _, d in _all(root) for b in _boxes(d)
    ) and any(any(isinstance(v, float) and not v.is_integer() for v in b) for _, d in _all(root) for b in _boxes(d)),
    "polygon-segmentation": _polygons,
    "zero-width-box": lambda root: any(b[2] == 0 < b[3] for _, d in _all(root) for b in _boxes(d)),
    "zero-height-box": lambda root: any(b[3] == 0 < b[2] for _, d in _all(root) for b in _boxes(d)),
    "image-without-boxes": lambda root: all(
        {i["id"] for i in d["images"]} - {a["image_id"] for a in d["annotations"]} for _, d in _all(root)
    ),
    "class-absent-from-split": _class_absent,
    "image-modes": _modes,
    "jpeg-and-png": _formats,
    "exif-orientation": _exif,
    "repeated-stem": _stems,
    "near-duplicate": _near_duplicate,
    "annotator-instructions": _instructions,
    "roboflow-readme": lambda root: "Roboflow" in (root / "README.roboflow.txt").read_text(encoding="utf-8"),
}


def test_every_claimed_quirk_has_a_check() -> None:
    assert set(QUIRK_CHECKS) == set(QUIRKS)


@pytest.mark.parametrize("quirk", list(QUIRK_CHECKS))
def test_the_sample_really_has_the_quirk(quirk: str, sample_root: Path) -> None:
    assert QUIRK_CHECKS[quirk](sample_root / "sample"), QUIRKS[quirk]


def test_the_reader_accepts_the_sample_without_any_repair(sample_root: Path) -> None:
    """Every pixel row of every image decodes cleanly too: the sample is valid, only quirky."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RepairWarning)
        warnings.simplefilter("error", NotScorableWarning)
        export = read_export(sample_root / "sample", verify_images="full", progress=False)
    assert export.classes == list(CLASSES)
    assert all(not split.repairs for split in export.splits.values())
    assert {name: len(split.images) for name, split in export.splits.items()} == {
        "train": 24,
        "validation": 8,
        "test": 8,
    }


def test_the_sample_is_drawn_the_same_every_time_and_seeds_change_it(sample_root: Path, tmp_path: Path) -> None:
    again = write_sample_export(tmp_path / "again")
    first = sample_root / "sample"
    files = sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert all((again / f).read_bytes() == (first / f).read_bytes() for f in files)
    other = write_sample_export(tmp_path / "other", seed=1, sizes={"train": 8, "valid": 8, "test": 8})
    first_boxes = [[a["bbox"] for a in _json(r, "train")["annotations"] if a["image_id"] == 0] for r in (again, other)]
    assert first_boxes[0] != first_boxes[1]


def test_sizes_too_small_for_the_quirks_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="more than 7 images"):
        write_sample_export(tmp_path, sizes={"train": 5, "valid": 8, "test": 8})


def test_ensure_sample_writes_once_into_the_cache_home() -> None:
    root = ensure_sample()
    stamp = (root / "train" / "_annotations.coco.json").stat().st_mtime_ns
    assert ensure_sample() == root
    assert (root / "train" / "_annotations.coco.json").stat().st_mtime_ns == stamp
