"""Read, validate and normalise a Roboflow COCO export folder.

Layout: ``<root>/{train,valid,test}/`` each with its images and ``_annotations.coco.json``,
plus ``README.dataset.txt`` and ``README.roboflow.txt`` at the root.

Normalisation, as the benchmark's protocol needs it:

- category 0 of a raw Roboflow export is the dataset's supercategory, not a class: it is
  dropped; exports cleaned by the ``rf100vl`` package (ids 0..N-1) and "COCO for
  MMDetection" exports (no category 0, no ``supercategory``) keep every category;
- annotation ids are renumbered from 1 within each split, in file order, because
  pycocotools treats a match to annotation id 0 as a false positive;
- images with no boxes are kept; zero-width and zero-height boxes are kept and counted;
- boxes are kept exactly as exported (integer or float) and in the displayed frame, the
  one datasets' ``Image`` feature decodes to (EXIF orientation applied). An annotation
  tool records the displayed frame, so that is what boxes are taken to be in, unless the
  JSON size is the stored size of an image turned by 90 degrees (see ``exif-rotated``).
  Flips and half-turns (orientations 2-4), and turns of square images, keep the size, so
  the frame cannot be told from the JSON: those boxes are taken as displayed.

Every problem raises :class:`~rf100vl_hf.errors.DataError` naming the file and the field,
except the safe repairs listed in :data:`REPAIRS`, which are applied with a warning and
counted. Hostile input is refused the same way: a file or split folder that links outside
the export, a FIFO, device or socket in place of a file (refused before it is opened), JSON
nested too deeply to parse, an id that is a string (:mod:`rf100vl_hf.ids`), two image
entries naming one file, a file or class name that is not Unicode text (a lone surrogate)
or holds a control character, and a README holding one (:mod:`rf100vl_hf.controls`). An
export that cannot be scored (no test split, or one without a box) is read with a
:class:`NotScorableWarning`. ``docs/data.md`` lists every case.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import stat
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import xxhash

from rf100vl_hf.controls import control_problem
from rf100vl_hf.errors import DataError, shown
from rf100vl_hf.ids import read_id
from rf100vl_hf.images import TRANSPOSING_ORIENTATIONS, ImageProbe, probe_image
from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.rf100vl.request import VerifyImages
from rf100vl_hf.rf100vl.sources import ANNOTATIONS_FILE, SPLIT_FOLDERS, present_splits
from rf100vl_hf.safepaths import refuse_special, resolve_inside, special_kind, text_problem

README_DATASET = "README.dataset.txt"
README_ROBOFLOW = "README.roboflow.txt"

REPAIRS: dict[str, str] = {
    "box-clipped": "a box that reaches outside its image is clipped to the image (a box entirely outside is an error)",
    "size-from-file": "an image entry without width/height takes them from the file",
    "exif-rotated": (
        "an image whose EXIF orientation turns it by 90 degrees, and whose JSON size is the "
        "stored (unturned) size, has its size and boxes turned into the displayed frame"
    ),
    "area-from-box": "an annotation without area gets the area of its box",
    "duplicate-annotation-id": "repeated annotation ids are harmless (ids are renumbered from 1) and reported",
    "iscrowd-default": "an annotation without iscrowd gets iscrowd 0",
    "id-from-float": "an id written as a float with an integral value (3.0) is read as that integer",
}
"""The repairs applied with a warning instead of an error: each is safe because the
intended value is unambiguous. Everything else that is wrong is an error."""

"""``header``: parse headers and check end markers; ``full``: decode every image."""

ROBOFLOW_SUPERCATEGORY = "none"
EXPORT = "export folder"
"""What :func:`~rf100vl_hf.safepaths.resolve_inside` calls the root it keeps files inside."""
READ_AHEAD = 32
"""Image files the kernel is asked to start reading while earlier ones are checked, so that
disk waits overlap the checks (on a cold cache this halves the time of the validation pass)."""


class RepairWarning(UserWarning):
    """A documented repair of an export was applied (see ``REPAIRS``)."""


class NotScorableWarning(UserWarning):
    """The export has no test split, or a test split without a box: no model can be scored on it."""


@dataclass(frozen=True)
class Category:
    id: int
    name: str
    supercategory: Any = None


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
    fingerprint: str  # xxh3-128 over every byte the export is made of
    licenses: list[str] = field(default_factory=list)  # the names the annotation files' ``licenses`` state

    @property
    def name(self) -> str:
        return self.root.name


# ---------------------------------------------------------------------------- JSON


@dataclass
class ParsedFile:
    """An annotation file as parsed by :func:`read_classes`, with the repairs its categories needed."""

    data: dict[str, Any]
    raw: bytes
    repairs: Counter = field(default_factory=Counter)


def _load_json(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, "file", "annotation file not found") from None
    except OSError as exc:
        raise DataError(path, "file", f"cannot be read ({exc.strerror})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DataError(path, "json", f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise DataError(path, "json", f"not valid UTF-8 JSON: {exc}") from None
    except RecursionError:
        raise DataError(path, "json", "nested too deeply to parse (arrays or objects inside each other)") from None
    except ValueError as exc:  # what the parser refuses beyond syntax: an integer of thousands of digits
        raise DataError(path, "json", f"not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(path, "json", f"expected an object at top level, found {type(data).__name__}")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise DataError(path, key, "missing, or not a list")
    return data, raw


def _id_field(path: Path, where: str, record: dict, key: str, repairs: Counter) -> int:
    """An id field (:mod:`rf100vl_hf.ids`); one written as an integral float is counted."""
    value, was_float = read_id(record.get(key), path, f"{where}.{key}")
    if was_float:
        repairs["id-from-float"] += 1
    return value


def _int_field(path: Path, where: str, record: dict, key: str) -> int:
    """An integer field that fits the int64 columns it is stored in."""
    value = record.get(key)
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise DataError(path, f"{where}.{key}", f"expected an integer, found {shown(value)}")
    if not -(2**63) <= value < 2**63:
        raise DataError(path, f"{where}.{key}", f"{shown(value)} does not fit in 64 bits")
    return int(value)


def _object(path: Path, where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise DataError(path, where, f"expected an object, found {shown(value)}")
    return value


def _parse_categories(path: Path, data: dict, repairs: Counter) -> list[Category]:
    categories: list[Category] = []
    seen: set[int] = set()
    for i, raw in enumerate(data["categories"]):
        where = f"categories[{i}]"
        cat = _object(path, where, raw)
        cid = _id_field(path, where, cat, "id", repairs)
        if cid in seen:
            raise DataError(path, f"{where}.id", f"duplicate category id {cid}")
        seen.add(cid)
        name = cat.get("name")
        if not isinstance(name, str) or not name.strip():
            raise DataError(path, f"{where}.name", f"expected a non-empty string, found {shown(name)}")
        problem = text_problem(name)
        if problem:
            raise DataError(path, f"{where}.name", f"{shown(name)} {problem}")
        categories.append(Category(cid, name, cat.get("supercategory")))
    return categories


def _licenses(path: Path, data: dict) -> list[str]:
    """The licence names an annotation file states in COCO's ``licenses`` (entries with no name,
    or an empty one, are skipped: they state nothing)."""
    listed = data.get("licenses") or []
    if not isinstance(listed, list):
        raise DataError(path, "licenses", f"expected a list, found {shown(listed)}")
    names = []
    for i, raw in enumerate(listed):
        name = _object(path, f"licenses[{i}]", raw).get("name")
        if name is not None and not isinstance(name, str):
            raise DataError(path, f"licenses[{i}].name", f"expected a string, found {shown(name)}")
        problem = text_problem(name) if name else None
        if problem:
            raise DataError(path, f"licenses[{i}].name", f"{shown(name)} {problem}")
        if name and name.strip():
            names.append(name.strip())
    return names


def decide_classes(path: Path, categories: list[Category]) -> tuple[list[Category], str, str | None]:
    """Which categories are classes, and which of the three layouts the export has.

    A category 0 with ``supercategory: "none"`` that other categories name as their
    supercategory is Roboflow's dataset-level category and is dropped ("roboflow").
    Otherwise a category 0 is a real class ("rf100vl-cleaned", ids 0..N-1); with no
    category 0 at all every category is a class ("mmdetection").
    """
    ordered = sorted(categories, key=lambda c: c.id)
    zero = next((c for c in ordered if c.id == 0), None)
    if zero is None:
        classes, layout, dropped = ordered, "mmdetection", None
    elif zero.supercategory == ROBOFLOW_SUPERCATEGORY and any(c.supercategory == zero.name for c in ordered[1:]):
        classes, layout, dropped = ordered[1:], "roboflow", zero.name
    else:
        classes, layout, dropped = ordered, "rf100vl-cleaned", None
    if not classes:
        raise DataError(path, "categories", "no classes")
    first_id: dict[str, int] = {}
    for c in classes:
        if c.name in first_id:
            used = f"is used by ids {first_id[c.name]} and {c.id}"
            raise DataError(path, "categories", f"class name {shown(c.name)} {used}")
        first_id[c.name] = c.id
    return classes, layout, dropped


def read_classes(
    root: Path, splits: Iterable[str]
) -> tuple[list[Category], str, str | None, dict[str, ParsedFile]]:
    """Parse the annotation files of ``splits`` and decide the export's classes.

    Every split must list the same categories (Roboflow writes the full list into each).
    A split folder or annotation file that links outside ``root`` is refused, and so is an
    annotation file that is a FIFO, a device or a socket.
    """
    parsed: dict[str, ParsedFile] = {}
    reference: tuple[Path, list[Category]] | None = None
    for split in splits:
        folder = root / SPLIT_FOLDERS[split]
        path = folder / ANNOTATIONS_FILE
        resolve_inside(root, folder, folder, "folder", what=EXPORT)
        resolve_inside(root, path, path, "file", what=EXPORT)
        refuse_special(path, path, "file")
        data, raw = _load_json(path)
        repairs: Counter = Counter()
        categories = _parse_categories(path, data, repairs)
        if reference is None:
            reference = (path, categories)
        elif {(c.id, c.name) for c in categories} != {(c.id, c.name) for c in reference[1]}:
            raise DataError(path, "categories", f"differ from those of {reference[0]}")
        parsed[split] = ParsedFile(data, raw, repairs)
    if reference is None:
        folders = ", ".join(SPLIT_FOLDERS.values())
        raise DataError(root, "splits", f"no split folder ({folders}) with {ANNOTATIONS_FILE}")
    classes, layout, supercategory = decide_classes(*reference)
    return classes, layout, supercategory, parsed


# -------------------------------------------------------------------------- images


def _safe_image_path(folder: Path, json_path: Path, where: str, file_name: Any) -> Path:
    """``folder/file_name``, refusing a name that would leave the folder."""
    if not isinstance(file_name, str) or not file_name:
        raise DataError(json_path, f"{where}.file_name", f"expected a file name, found {shown(file_name)}")
    problem = text_problem(file_name)
    if problem:
        raise DataError(json_path, f"{where}.file_name", f"{shown(file_name)} {problem}")
    normalized = posixpath.normpath(file_name.replace("\\", "/"))
    first = normalized.split("/")[0]
    if normalized.startswith("/") or first == ".." or ":" in first:  # absolute, upwards, or a drive
        raise DataError(json_path, f"{where}.file_name", f"{shown(file_name)} escapes the folder {folder}")
    return folder / normalized


@dataclass(frozen=True)
class _Frame:
    """How an image's JSON entry relates to its file: the probe, and whether boxes need turning."""

    probe: ImageProbe
    turn: bool


def _image_size(json_path: Path, where: str, entry: dict, probe: ImageProbe, repairs: Counter) -> bool:
    """Check the JSON size against the file; return whether the boxes are in the stored frame."""
    sizes = (entry.get("width"), entry.get("height"))
    if None in sizes:
        repairs["size-from-file"] += 1
        return False
    width, height = _int_field(json_path, where, entry, "width"), _int_field(json_path, where, entry, "height")
    if (width, height) == (probe.width, probe.height):
        return False
    if probe.orientation in TRANSPOSING_ORIENTATIONS and (width, height) == (probe.stored_width, probe.stored_height):
        repairs["exif-rotated"] += 1
        return True
    raise DataError(
        json_path,
        f"{where}.width/height",
        f"{width}x{height} disagrees with the file {shown(entry['file_name'])}, which is {probe.width}x{probe.height}",
    )


def _read_or_error(path: Path) -> bytes | OSError:
    try:
        return path.read_bytes()
    except OSError as exc:
        return exc


def _advise_will_need(path: Path) -> None:
    """Ask the kernel to start reading ``path`` into the page cache, and return at once."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)
    except OSError:
        pass  # reading the file reports what is wrong with it


def _read_ahead(paths: list[Path], depth: int = READ_AHEAD) -> Iterator[bytes | OSError]:
    """The contents of ``paths`` in order (or the error reading each), with the next ``depth``
    files already on their way from the disk where the system can be told (POSIX)."""
    advise = hasattr(os, "posix_fadvise")
    for path in paths[:depth] if advise else []:
        _advise_will_need(path)
    for i, path in enumerate(paths):
        if advise and i + depth < len(paths):
            _advise_will_need(paths[i + depth])
        yield _read_or_error(path)


def _mode(path: Path, follow: bool) -> int | None:
    """``path``'s ``st_mode`` (of the link itself unless ``follow``); None for a path that cannot
    be looked at, which is reported when it is read."""
    try:
        return path.stat(follow_symlinks=follow).st_mode
    except (OSError, ValueError):
        return None


def _image_entries(
    root: Path, folder: Path, json_path: Path, rows: list, repairs: Counter
) -> list[tuple[str, dict, int, Path]]:
    """Each image entry with its place, id and file, checked before any file is read.

    ``folder`` is known to lie inside ``root``; a file directly in it that is no link does
    too, so only links and names with sub-folders pay for resolving every path component.
    A file that is a FIFO, a device or a socket is refused here, since even asking the
    kernel to read a FIFO ahead waits for a writer. Two entries naming one file are refused:
    the same pixels would be scored twice, under two ids and with each entry's boxes.
    """
    entries, seen = [], set()
    files: dict[Path, tuple[int, int]] = {}  # file -> (index, id) of the entry that named it first
    for i, raw in enumerate(rows):
        where = f"images[{i}]"
        entry = _object(json_path, where, raw)
        image_id = _id_field(json_path, where, entry, "id", repairs)
        if image_id in seen:
            raise DataError(json_path, f"{where}.id", f"duplicate image id {image_id}")
        seen.add(image_id)
        file_name = entry.get("file_name")
        path = _safe_image_path(folder, json_path, where, file_name)
        first = files.setdefault(path, (i, image_id))
        if first[0] != i:
            raise DataError(
                json_path, f"{where}.file_name", f"{shown(file_name)} of image id {image_id} is also the file of "
                f"image id {first[1]} (images[{first[0]}]): one file under two ids would be scored twice",
            )
        mode = _mode(path, follow=False)
        if path.parent != folder or (mode is not None and stat.S_ISLNK(mode)):
            resolve_inside(root, path, json_path, f"{where}.file_name", what=EXPORT)
            mode = _mode(path, follow=True)
        kind = special_kind(mode) if mode is not None else None
        if kind:
            raise DataError(json_path, f"{where}.file_name", f"{shown(file_name)} is a {kind}, not a regular file")
        entries.append((where, entry, image_id, path))
    return entries


def _read_images(
    root: Path,
    folder: Path,
    json_path: Path,
    rows: list,
    repairs: Counter,
    hasher: Any | None,
    verify_images: VerifyImages,
    progress: bool,
) -> tuple[dict[int, ImageRecord], dict[int, _Frame]]:
    images: dict[int, ImageRecord] = {}
    frames: dict[int, _Frame] = {}
    entries = _image_entries(root, folder, json_path, rows, repairs)
    bar = progress_bar(entries, f"{folder.parent.name}/{folder.name}", unit="img", disable=not progress)
    for (where, entry, image_id, path), blob in zip(bar, _read_ahead([path for *_, path in entries])):
        file_name = entry["file_name"]
        if isinstance(blob, FileNotFoundError):
            raise DataError(json_path, f"{where}.file_name", f"image {shown(file_name)} not found in {folder}")
        if isinstance(blob, OSError):
            raise DataError(json_path, f"{where}.file_name", f"{shown(file_name)} cannot be read ({blob.strerror})")
        if hasher is not None:
            hasher.update(file_name.encode())
            hasher.update(xxhash.xxh3_64_digest(blob))
        probe = probe_image(blob, path, full=verify_images == "full")
        frames[image_id] = _Frame(probe, _image_size(json_path, where, entry, probe, repairs))
        images[image_id] = ImageRecord(image_id, file_name, path, probe.width, probe.height)
    return images, frames


# --------------------------------------------------------------------- annotations


def _turn_box(box: list[float], orientation: int, stored_w: int, stored_h: int) -> list[float]:
    """Map an xywh box from the stored frame into the displayed frame of EXIF ``orientation`` 5-8."""
    x0, y0, x1, y1 = box[0], box[1], box[0] + box[2], box[1] + box[3]
    if orientation == 5:  # transpose
        xs, ys = (y0, y1), (x0, x1)
    elif orientation == 6:  # displayed = stored turned 90 degrees clockwise
        xs, ys = (stored_h - y0, stored_h - y1), (x0, x1)
    elif orientation == 7:  # transverse
        xs, ys = (stored_h - y0, stored_h - y1), (stored_w - x0, stored_w - x1)
    else:  # 8: displayed = stored turned 90 degrees counter-clockwise
        xs, ys = (y0, y1), (stored_w - x0, stored_w - x1)
    return [min(xs), min(ys), abs(xs[1] - xs[0]), abs(ys[1] - ys[0])]


def _finite(value: Any) -> bool:
    """Whether ``value`` is a finite JSON number (an integer too large for a float is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _bbox(path: Path, where: str, ann: dict) -> list[float]:
    box = ann.get("bbox")
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        raise DataError(path, f"{where}.bbox", f"expected [x, y, w, h], found {shown(box)}")
    if not all(_finite(v) for v in box):
        raise DataError(path, f"{where}.bbox", f"expected four finite numbers, found {shown(box)}")
    if box[2] < 0 or box[3] < 0:
        raise DataError(path, f"{where}.bbox", f"negative width or height in {shown(box)}")
    return list(box)


def _inside(path: Path, where: str, box: list[float], record: ImageRecord) -> tuple[list[float], float]:
    """The box clipped to its image and how far it reached out (0 when inside)."""
    x0, y0, x1, y1 = box[0], box[1], box[0] + box[2], box[1] + box[3]
    ix0, iy0 = max(0, x0), max(0, y0)
    ix1, iy1 = min(record.width, x1), min(record.height, y1)
    has_area = box[2] > 0 and box[3] > 0
    if ix1 < ix0 or iy1 < iy0 or (has_area and (ix1 == ix0 or iy1 == iy0)):
        raise DataError(
            path,
            f"{where}.bbox",
            f"{shown(box)} lies entirely outside image {shown(record.file_name)} ({record.width}x{record.height})",
        )
    overhang = max(0, -x0, -y0, x1 - record.width, y1 - record.height)
    if not overhang:
        return box, 0
    return [ix0, iy0, ix1 - ix0, iy1 - iy0], overhang


def _read_annotations(
    json_path: Path,
    rows: list,
    images: dict[int, ImageRecord],
    frames: dict[int, _Frame],
    class_of: dict[int, int],
    dropped_category: int | None,
    repairs: Counter,
) -> tuple[int, float]:
    """Attach the annotations to their images; return the zero-area count and largest overhang."""
    seen_ids: set[int] = set()
    zero_area, overhang = 0, 0.0
    for i, raw in enumerate(rows):
        where = f"annotations[{i}]"
        ann = _object(json_path, where, raw)
        source_id = _id_field(json_path, where, ann, "id", repairs)
        if source_id in seen_ids:
            repairs["duplicate-annotation-id"] += 1
        seen_ids.add(source_id)
        image_id = _id_field(json_path, where, ann, "image_id", repairs)
        if image_id not in images:
            raise DataError(json_path, f"{where}.image_id", f"no image has id {image_id}")
        category_id = _id_field(json_path, where, ann, "category_id", repairs)
        if category_id not in class_of:
            if category_id == dropped_category:
                reason = f"{category_id} is the export's dataset-level supercategory, not a class"
            else:
                reason = f"{category_id} is not a class id (classes: {sorted(class_of)})"
            raise DataError(json_path, f"{where}.category_id", reason)
        record, frame = images[image_id], frames[image_id]
        box = _bbox(json_path, where, ann)
        if frame.turn:
            probe = frame.probe
            box = _turn_box(box, probe.orientation, probe.stored_width, probe.stored_height)
        box, reach = _inside(json_path, where, box, record)
        if reach:
            repairs["box-clipped"] += 1
            overhang = max(overhang, reach)
        if box[2] == 0 or box[3] == 0:
            zero_area += 1
        area = ann.get("area")
        if area is None:
            repairs["area-from-box"] += 1
            area = box[2] * box[3]
        elif not _finite(area) or area < 0:
            raise DataError(json_path, f"{where}.area", f"expected a non-negative number, found {shown(area)}")
        iscrowd = ann.get("iscrowd")
        if iscrowd is None:
            repairs["iscrowd-default"] += 1
            iscrowd = 0
        elif iscrowd not in (0, 1):
            raise DataError(json_path, f"{where}.iscrowd", f"expected 0 or 1, found {shown(iscrowd)}")
        record.annotations.append(
            Annotation(i + 1, source_id, class_of[category_id], box, float(area), int(iscrowd))
        )
    return zero_area, overhang


def _warn(path: Path, repairs: Counter, details: dict[str, str]) -> None:
    for kind, count in sorted(repairs.items()):
        extra = f" ({details[kind]})" if kind in details else ""
        warnings.warn(f"{path}: repaired {count} x {kind}: {REPAIRS[kind]}{extra}", RepairWarning, stacklevel=4)


def read_split(
    folder: Path,
    parsed: ParsedFile,
    class_of: dict[int, int],
    hasher: Any | None = None,
    verify_images: VerifyImages = "header",
    progress: bool = True,
    dropped_category: int | None = None,
) -> ExportSplit:
    """Validate one split folder from its parsed annotation file (see :func:`read_classes`,
    which also checked that the folder lies inside the export, ``folder.parent``).

    ``class_of`` maps the export's category ids to class indices; ``dropped_category`` is
    the id of a raw export's category 0, named in the error when a box uses it.
    """
    json_path = folder / ANNOTATIONS_FILE
    data = parsed.data
    if hasher is not None:
        hasher.update(parsed.raw)
    if not data["images"]:
        raise DataError(json_path, "images", "no images: the split is empty")
    repairs = Counter(parsed.repairs)
    images, frames = _read_images(
        folder.parent, folder, json_path, data["images"], repairs, hasher, verify_images, progress
    )
    zero_area, overhang = _read_annotations(
        json_path, data["annotations"], images, frames, class_of, dropped_category, repairs
    )
    _warn(json_path, repairs, {"box-clipped": f"largest overhang {overhang:g} px"} if overhang else {})
    return ExportSplit(json_path, list(images.values()), zero_area, repairs)


# -------------------------------------------------------------------------- export


def _read_text(root: Path, name: str) -> str | None:
    """A README's text (None when there is none); one holding a control character is refused."""
    path = root / name
    resolve_inside(root, path, path, "file", what=EXPORT)
    refuse_special(path, path, "file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise DataError(path, "text", f"not UTF-8 ({exc})") from None
    except OSError as exc:
        raise DataError(path, "file", f"cannot be read ({exc.strerror})") from None
    problem = control_problem(text, multiline=True)
    if problem:
        raise DataError(path, "text", problem)
    return text


def _warn_if_not_scorable(root: Path, splits: dict[str, ExportSplit]) -> None:
    """Say so when no model can be scored on the export: AP needs a test split with boxes."""
    test = splits.get("test")
    if test is None:
        reason = f"{root}: no test split ({SPLIT_FOLDERS['test']}/{ANNOTATIONS_FILE})"
    elif not any(image.annotations for image in test.images):
        reason = f"{test.annotation_file}: the test split has no annotations"
    else:
        return
    warnings.warn(f"{reason}: the dataset can be loaded, but no model can be scored on it", NotScorableWarning,
                  stacklevel=3)


def read_export(
    root: str | Path,
    verify_images: VerifyImages = "header",
    progress: bool = True,
    splits: Iterable[str] | None = None,
) -> Export:
    """Read and validate an export folder: every split that is present, or only ``splits``.

    Reading every split warns (:class:`NotScorableWarning`) when the test split is missing
    or holds no box.
    """
    root = Path(root)
    if verify_images not in ("header", "full"):
        raise ValueError(f"verify_images must be 'header' or 'full', not {verify_images!r}")
    if not root.is_dir():
        raise DataError(root, "folder", "not found")
    wanted = present_splits(root) if splits is None else list(splits)
    classes, layout, supercategory, parsed = read_classes(root, wanted)
    class_of = {c.id: i for i, c in enumerate(classes)}
    dropped = 0 if supercategory is not None else None
    hasher = xxhash.xxh3_128()
    readme_dataset = _read_text(root, README_DATASET)
    readme_roboflow = _read_text(root, README_ROBOFLOW)
    for text in (readme_dataset, readme_roboflow):
        hasher.update((text or "").encode())
    read = {}
    for split in wanted:
        hasher.update(split.encode())
        folder = root / SPLIT_FOLDERS[split]
        read[split] = read_split(folder, parsed[split], class_of, hasher, verify_images, progress, dropped)
    if splits is None:
        _warn_if_not_scorable(root, read)
    logger.info(
        "read %s: %s",
        root,
        ", ".join(f"{name} {len(s.images)} images, {sum(len(i.annotations) for i in s.images)} boxes"
                  for name, s in read.items()),
    )
    licenses = [name for split in wanted
                for name in _licenses(root / SPLIT_FOLDERS[split] / ANNOTATIONS_FILE, parsed[split].data)]
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
        licenses=list(dict.fromkeys(licenses)),
    )
