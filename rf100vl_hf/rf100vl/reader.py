"""Read, validate and normalise a Roboflow COCO export folder.

Layout: ``<root>/{train,valid,test}/`` each with its images and ``_annotations.coco.json``,
plus ``README.dataset.txt`` and ``README.roboflow.txt`` at the root.

Normalisation (DESIGN.md section 2):

- category 0 of a raw Roboflow export is the dataset's supercategory, not a class: it is
  dropped; exports cleaned by the ``rf100vl`` package (ids 0..N-1) and "COCO for
  MMDetection" exports (no category 0, no ``supercategory``) keep every category;
- annotation ids are renumbered from 1 within each split, in file order, because
  pycocotools treats a match to annotation id 0 as a false positive;
- boxes are kept exactly as exported (integer or float) and in the displayed frame, the
  one datasets' ``Image`` feature decodes to (EXIF orientation applied).

Every problem raises :class:`~rf100vl_hf.errors.DataError` naming the file and the field,
except the safe repairs listed in :data:`REPAIRS`, which are applied with a warning.
"""

from __future__ import annotations

import json
import math
import posixpath
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import xxhash
from tqdm.auto import tqdm

from rf100vl_hf.errors import DataError
from rf100vl_hf.images import ImageProbe, probe_image

ANNOTATIONS_FILE = "_annotations.coco.json"
SPLIT_FOLDERS: dict[str, str] = {"train": "train", "validation": "valid", "test": "test"}
README_DATASET = "README.dataset.txt"
README_ROBOFLOW = "README.roboflow.txt"

REPAIRS: dict[str, str] = {
    "box-clipped": "a box that reaches outside its image is clipped to the image",
    "size-from-file": "an image entry without width/height takes them from the file",
    "exif-rotated": (
        "an image whose EXIF orientation turns it by 90 degrees, and whose JSON size is the "
        "stored (unturned) size, has its boxes turned into the displayed frame"
    ),
    "area-from-box": "an annotation without area gets the area of its box",
    "duplicate-annotation-id": "repeated annotation ids are harmless (ids are renumbered from 1) and reported",
    "iscrowd-default": "an annotation without iscrowd gets iscrowd 0",
}
"""The repairs applied with a warning instead of an error: each is safe because the
intended value is unambiguous. Everything else that is wrong is an error."""


class RepairWarning(UserWarning):
    """A documented repair of an export was applied (see ``REPAIRS``)."""


@dataclass(frozen=True)
class Category:
    id: int
    name: str


@dataclass
class Annotation:
    id: int  # renumbered from 1 within the split, in file order
    source_id: int  # as exported
    category: int  # index into the export's classes
    bbox: list[float]  # COCO xywh in pixels, as exported (then repaired if needed)
    area: float
    iscrowd: int


@dataclass
class ImageRecord:
    image_id: int  # the export's own id
    file_name: str
    path: Path
    width: int  # displayed size (EXIF orientation applied)
    height: int
    annotations: list[Annotation] = field(default_factory=list)


@dataclass
class ExportSplit:
    """One split of an export: images in file order, each with its annotations in file order."""

    annotation_file: Path
    images: list[ImageRecord]
    zero_area_boxes: int = 0
    repairs: Counter = field(default_factory=Counter)


@dataclass
class Export:
    """A whole export folder, validated: classes exclude Roboflow's category 0."""

    root: Path
    classes: list[str]
    category_ids: list[int]  # the export's category id of each class
    layout: str  # "roboflow", "rf100vl-cleaned" or "mmdetection"
    supercategory: str | None  # name of the dropped category 0, if any
    splits: dict[str, ExportSplit]
    readme_dataset: str | None
    readme_roboflow: str | None
    fingerprint: str

    @property
    def name(self) -> str:
        return self.root.name


def _load_json(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, "file", "annotation file not found") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise DataError(path, "json", f"not valid JSON{where}: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(path, "json", f"expected an object at top level, found {type(data).__name__}")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise DataError(path, key, "missing, or not a list")
    return data, raw


def _int_field(path: Path, where: str, record: dict, key: str) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise DataError(path, f"{where}.{key}", f"expected an integer, found {value!r}")
    return int(value)


def _parse_categories(path: Path, data: dict) -> tuple[list[Category], dict[int, Any]]:
    categories, supers, seen = [], {}, set()
    for i, cat in enumerate(data["categories"]):
        where = f"categories[{i}]"
        if not isinstance(cat, dict):
            raise DataError(path, where, f"expected an object, found {cat!r}")
        cid = _int_field(path, where, cat, "id")
        if cid in seen:
            raise DataError(path, f"{where}.id", f"duplicate category id {cid}")
        seen.add(cid)
        name = cat.get("name")
        if not isinstance(name, str) or not name.strip():
            raise DataError(path, f"{where}.name", f"expected a non-empty string, found {name!r}")
        categories.append(Category(cid, name))
        supers[cid] = cat.get("supercategory")
    return categories, supers


def decide_classes(
    path: Path, categories: list[Category], supercategories: dict[int, Any], used: set[int]
) -> tuple[list[Category], str, str | None]:
    """Which categories are classes, and which of the three layouts the export has.

    A category 0 with ``supercategory: "none"`` that no annotation uses, beside other
    categories, is Roboflow's dataset-level supercategory and is dropped ("roboflow").
    Otherwise a category 0 is a real class ("rf100vl-cleaned", ids 0..N-1); with no
    category 0 at all every category is a class ("mmdetection").
    """
    ordered = sorted(categories, key=lambda c: c.id)
    ids = {c.id for c in categories}
    if 0 not in ids:
        return ordered, "mmdetection", None
    zero = next(c for c in categories if c.id == 0)
    if supercategories.get(0) == "none" and 0 not in used and len(categories) > 1:
        return [c for c in ordered if c.id != 0], "roboflow", zero.name
    return ordered, "rf100vl-cleaned", None


def _bbox(path: Path, where: str, ann: dict) -> list[float]:
    box = ann.get("bbox")
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        raise DataError(path, f"{where}.bbox", f"expected [x, y, w, h], found {box!r}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in box):
        raise DataError(path, f"{where}.bbox", f"expected four finite numbers, found {box!r}")
    if box[2] < 0 or box[3] < 0:
        raise DataError(path, f"{where}.bbox", f"negative width or height in {box!r}")
    return list(box)


def _safe_image_path(folder: Path, json_path: Path, where: str, file_name: Any) -> Path:
    """Resolve ``file_name`` inside ``folder``; refuse anything that would leave it."""
    if not isinstance(file_name, str) or not file_name:
        raise DataError(json_path, f"{where}.file_name", f"expected a file name, found {file_name!r}")
    normalized = posixpath.normpath(file_name.replace("\\", "/"))
    if normalized.startswith(("/", "../")) or normalized == ".." or ":" in normalized.split("/")[0]:
        raise DataError(json_path, f"{where}.file_name", f"{file_name!r} escapes the folder {folder}")
    path = folder / normalized
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        raise DataError(json_path, f"{where}.file_name", f"{file_name!r} escapes the folder {folder}") from None
    return path


def _turn_box(box: list[float], orientation: int, stored_w: int, stored_h: int) -> list[float]:
    """Map an xywh box from the stored frame into the displayed frame of EXIF ``orientation`` 5-8."""
    x0, y0, x1, y1 = box[0], box[1], box[0] + box[2], box[1] + box[3]
    if orientation == 5:  # transpose
        corners = [(y0, x0), (y1, x1)]
    elif orientation == 6:  # rotate 90 degrees clockwise
        corners = [(stored_h - y0, x0), (stored_h - y1, x1)]
    elif orientation == 7:  # transverse
        corners = [(stored_h - y0, stored_w - x0), (stored_h - y1, stored_w - x1)]
    else:  # 8: rotate 90 degrees counter-clockwise
        corners = [(y0, stored_w - x0), (y1, stored_w - x1)]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]


def _warn(path: Path, repairs: Counter, details: dict[str, str]) -> None:
    for kind, count in sorted(repairs.items()):
        extra = f" ({details[kind]})" if kind in details else ""
        warnings.warn(f"{path}: repaired {count} x {kind}: {REPAIRS[kind]}{extra}", RepairWarning, stacklevel=3)


def read_split(
    folder: Path,
    parsed: tuple[dict[str, Any], bytes],
    class_of: dict[int, int],
    hasher: Any | None = None,
    verify_images: str = "header",
    progress: bool = True,
) -> ExportSplit:
    """Validate one split folder from its parsed annotation file (see :func:`read_classes`).

    ``class_of`` maps the export's category ids to class indices; category 0 of a raw export
    maps to nothing, so a box on it is an error.
    """
    json_path = folder / ANNOTATIONS_FILE
    data, raw = parsed
    if hasher is not None:
        hasher.update(raw)
    if not data["images"]:
        raise DataError(json_path, "images", "no images: the split is empty")
    repairs: Counter = Counter()
    details: dict[str, str] = {}
    images: dict[int, ImageRecord] = {}
    probes: dict[int, ImageProbe] = {}
    json_sizes: dict[int, tuple[int | None, int | None]] = {}
    rows = data["images"]
    for i, img in enumerate(tqdm(rows, desc=f"{folder.parent.name}/{folder.name}", unit="img", disable=not progress)):
        where = f"images[{i}]"
        if not isinstance(img, dict):
            raise DataError(json_path, where, f"expected an object, found {img!r}")
        image_id = _int_field(json_path, where, img, "id")
        if image_id in images:
            raise DataError(json_path, f"{where}.id", f"duplicate image id {image_id}")
        path = _safe_image_path(folder, json_path, where, img.get("file_name"))
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise DataError(json_path, f"{where}.file_name", f"image {img['file_name']!r} not found in {folder}") from None
        except IsADirectoryError:
            raise DataError(json_path, f"{where}.file_name", f"{img['file_name']!r} is a folder, not an image") from None
        if hasher is not None:
            hasher.update(img["file_name"].encode())
            hasher.update(xxhash.xxh3_64_digest(blob))
        probe = probe_image(blob, path, full=verify_images == "full")
        sizes = (img.get("width"), img.get("height"))
        for key, value in zip(("width", "height"), sizes):
            if value is not None:
                _int_field(json_path, where, img, key)
        if None in sizes:
            repairs["size-from-file"] += 1
            width, height = probe.width, probe.height
        elif (sizes[0], sizes[1]) == (probe.width, probe.height):
            width, height = probe.width, probe.height
        elif probe.orientation in (5, 6, 7, 8) and (sizes[0], sizes[1]) == (probe.stored_width, probe.stored_height):
            width, height = probe.width, probe.height
        else:
            raise DataError(
                json_path,
                f"{where}.width/height",
                f"{sizes[0]}x{sizes[1]} disagrees with the file {img['file_name']!r}, which is {probe.width}x{probe.height}",
            )
        images[image_id] = ImageRecord(image_id, img["file_name"], path, int(width), int(height))
        probes[image_id] = probe
        json_sizes[image_id] = (sizes[0], sizes[1])

    seen_ann_ids: set[int] = set()
    zero_area = 0
    overhang = 0.0
    for i, ann in enumerate(data["annotations"]):
        where = f"annotations[{i}]"
        if not isinstance(ann, dict):
            raise DataError(json_path, where, f"expected an object, found {ann!r}")
        source_id = _int_field(json_path, where, ann, "id")
        if source_id in seen_ann_ids:
            repairs["duplicate-annotation-id"] += 1
        seen_ann_ids.add(source_id)
        image_id = _int_field(json_path, where, ann, "image_id")
        if image_id not in images:
            raise DataError(json_path, f"{where}.image_id", f"no image has id {image_id}")
        category_id = _int_field(json_path, where, ann, "category_id")
        if category_id not in class_of:
            known = sorted(class_of)
            raise DataError(json_path, f"{where}.category_id", f"{category_id} is not a class id (classes: {known})")
        box = _bbox(json_path, where, ann)
        record = images[image_id]
        probe = probes[image_id]
        if probe.orientation in (5, 6, 7, 8) and json_sizes[image_id] == (probe.stored_width, probe.stored_height):
            if json_sizes[image_id] != (probe.width, probe.height):
                box = _turn_box(box, probe.orientation, probe.stored_width, probe.stored_height)
                repairs["exif-rotated"] += 1
        x0, y0, x1, y1 = box[0], box[1], box[0] + box[2], box[1] + box[3]
        ix0, iy0 = max(0, x0), max(0, y0)
        ix1, iy1 = min(record.width, x1), min(record.height, y1)
        if ix1 < ix0 or iy1 < iy0 or (box[2] > 0 and box[3] > 0 and (ix1 == ix0 or iy1 == iy0)):
            raise DataError(
                json_path,
                f"{where}.bbox",
                f"{box!r} lies entirely outside image {record.file_name!r} ({record.width}x{record.height})",
            )
        if (ix0, iy0, ix1, iy1) != (x0, y0, x1, y1):
            overhang = max(overhang, -x0, -y0, x1 - record.width, y1 - record.height)
            box = [ix0, iy0, ix1 - ix0, iy1 - iy0]
            repairs["box-clipped"] += 1
        if box[2] == 0 or box[3] == 0:
            zero_area += 1
        area = ann.get("area")
        if area is None:
            repairs["area-from-box"] += 1
            area = box[2] * box[3]
        elif isinstance(area, bool) or not isinstance(area, (int, float)) or not math.isfinite(area) or area < 0:
            raise DataError(json_path, f"{where}.area", f"expected a non-negative number, found {area!r}")
        iscrowd = ann.get("iscrowd")
        if iscrowd is None:
            repairs["iscrowd-default"] += 1
            iscrowd = 0
        elif iscrowd not in (0, 1):
            raise DataError(json_path, f"{where}.iscrowd", f"expected 0 or 1, found {iscrowd!r}")
        record.annotations.append(
            Annotation(
                id=i + 1,
                source_id=source_id,
                category=class_of[category_id],
                bbox=box,
                area=float(area),
                iscrowd=int(iscrowd),
            )
        )
    if overhang:
        details["box-clipped"] = f"largest overhang {overhang:g} px"
    _warn(json_path, repairs, details)
    return ExportSplit(json_path, list(images.values()), zero_area, repairs)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise DataError(path, "text", f"not UTF-8 ({exc})") from None


def read_classes(root: Path, splits: Iterable[str]) -> tuple[list[Category], str, str | None, dict[str, tuple[dict, bytes]]]:
    """Parse the annotation files of ``splits`` and decide the export's classes.

    Every split must list the same categories (Roboflow writes the full list into each).
    """
    parsed: dict[str, tuple[dict, bytes]] = {}
    reference: tuple[Path, list[Category], dict[int, Any]] | None = None
    used: set[int] = set()
    for split in splits:
        path = root / SPLIT_FOLDERS[split] / ANNOTATIONS_FILE
        data, raw = _load_json(path)
        categories, supers = _parse_categories(path, data)
        if reference is None:
            reference = (path, categories, supers)
        elif {(c.id, c.name) for c in categories} != {(c.id, c.name) for c in reference[1]}:
            raise DataError(path, "categories", f"differ from those of {reference[0]}")
        used.update(a.get("category_id") for a in data["annotations"] if isinstance(a, dict))
        parsed[split] = (data, raw)
    if reference is None:
        raise DataError(root, "splits", f"no split folder ({', '.join(SPLIT_FOLDERS.values())}) with {ANNOTATIONS_FILE}")
    classes, layout, supercategory = decide_classes(reference[0], reference[1], reference[2], used)
    if not classes:
        raise DataError(reference[0], "categories", "no classes")
    return classes, layout, supercategory, parsed


def present_splits(root: Path) -> list[str]:
    """The splits of an export folder that have an annotation file, in train/validation/test order."""
    return [s for s, folder in SPLIT_FOLDERS.items() if (root / folder / ANNOTATIONS_FILE).is_file()]


def read_export(root: str | Path, verify_images: str = "header", progress: bool = True) -> Export:
    """Read and validate a whole export folder (every split that is present)."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(root, "folder", "not found")
    splits = present_splits(root)
    classes, layout, supercategory, parsed = read_classes(root, splits)
    class_of = {c.id: i for i, c in enumerate(classes)}
    hasher = xxhash.xxh3_128()
    readme_dataset = _read_text(root / README_DATASET)
    readme_roboflow = _read_text(root / README_ROBOFLOW)
    for text in (readme_dataset, readme_roboflow):
        hasher.update((text or "").encode())
    read = {}
    for split in splits:
        hasher.update(split.encode())
        read[split] = read_split(root / SPLIT_FOLDERS[split], parsed[split], class_of, hasher, verify_images, progress)
    return Export(
        root=root,
        classes=[c.name for c in classes],
        category_ids=[c.id for c in classes],
        layout=layout,
        supercategory=supercategory,
        splits=read,
        readme_dataset=readme_dataset,
        readme_roboflow=readme_roboflow,
        fingerprint=hasher.hexdigest(),
    )
