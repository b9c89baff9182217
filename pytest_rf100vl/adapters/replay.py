"""Replay detections saved in COCO results format, the format of challenge submissions:
a JSON list of ``{"image_id", "category_id", "bbox": [x, y, w, h], "score"}`` with the
image and category ids of the dataset's original export and boxes in pixels.

The spec is ``predictions:PATH``. PATH is one file (used for whatever dataset is run) or
a folder holding one file per dataset, found as ``<dataset>/<split>.json``, else
``<dataset>_<split>.json``, else ``<dataset>.json``. Every record is checked when the
task is set: a malformed record or (when the runner passes the split's image ids) an
unknown image id stops the run with the file and the record's index, as pycocotools'
``loadRes`` refuses an unknown image. A record whose category id is not a class of the
dataset (e.g. the supercategory 0 of a raw export) is ignored, as pycocotools ignores it,
and counted in :attr:`ReplayAdapter.ignored_records`. Ids follow the one rule of
:mod:`rf100vl_hf.ids`: a string id (``"3"``) is an error, an integral float (``3.0``) is read
as the integer, counted in :attr:`ReplayAdapter.float_ids` and warned about. Images with no
record get no detections.

The detections are scored exactly as submitted (``submitted_output``): boxes that cross the
image edge are not clipped, and the cap of 500 per image and class is pycocotools' maxDets.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import xxhash

from rf100vl_hf.errors import DataError
from rf100vl_hf.ids import read_id

from pytest_rf100vl.adapters.base import Adapter, Detections, DetectionTask, ImageItem
from pytest_rf100vl.adapters.registry import listed

FIELDS = ("image_id", "category_id", "bbox", "score")


def predictions_file(path: Path, dataset: str, split: str) -> Path:
    """The file holding ``dataset``'s predictions for ``split`` under ``path`` (see module docs)."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: predictions file or folder does not exist")
    candidates = [path / dataset / f"{split}.json", path / f"{dataset}_{split}.json", path / f"{dataset}.json"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c.relative_to(path)) for c in candidates)
    raise FileNotFoundError(f"{path}: no predictions for dataset {dataset!r}, split {split!r} (looked for {tried})")


def file_revision(path: Path) -> str:
    """A replayed file's revision: the hash of its bytes."""
    return f"xxh3:{xxhash.xxh3_128_hexdigest(path.read_bytes())}"


def _number(value: Any, path: Path, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(path, field, f"expected a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Replayed:
    """A results file read for one task: detections per image id, and the records ignored."""

    detections: dict[int, Detections]  # ``xyxy`` pixels, class indices into the task's classes
    ignored: int  # records of a category id that is not a class (pycocotools ignores them too)
    float_ids: int = 0  # ids written as integral floats (3.0), read as integers


def read_predictions(path: Path, category_ids: tuple[int, ...], image_ids: tuple[int, ...] = ()) -> Replayed:
    """The detections of a COCO results file; ``category_ids`` holds the export's category id
    of each class."""
    try:
        records = json.loads(path.read_bytes())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(path, "file", f"cannot be read as JSON ({exc})") from exc
    if not isinstance(records, list):
        raise DataError(path, "top level", f"expected a list of COCO result records, got {type(records).__name__}")
    class_of = {category: index for index, category in enumerate(category_ids)}
    known_images = set(image_ids)
    rows: dict[int, list[tuple[float, ...]]] = defaultdict(list)
    ignored = float_ids = 0
    for index, record in enumerate(records):
        where = f"[{index}]"
        if not isinstance(record, dict):
            raise DataError(path, where, f"expected an object with {', '.join(FIELDS)}, got {type(record).__name__}")
        missing = [name for name in FIELDS if name not in record]
        if missing:
            raise DataError(path, where, f"missing {', '.join(missing)}")
        image_id, image_float = read_id(record["image_id"], path, f"{where}.image_id")
        category, category_float = read_id(record["category_id"], path, f"{where}.category_id")
        float_ids += image_float + category_float
        bbox = record["bbox"]
        if not isinstance(bbox, list) or len(bbox) != 4:
            raise DataError(path, f"{where}.bbox", f"expected [x, y, w, h], got {bbox!r}")
        x, y, w, h = (_number(v, path, f"{where}.bbox") for v in bbox)
        if w < 0 or h < 0:
            raise DataError(path, f"{where}.bbox", f"negative width or height in {bbox!r}")
        score = _number(record["score"], path, f"{where}.score")
        if known_images and image_id not in known_images:
            raise DataError(path, f"{where}.image_id", f"{image_id} is not an image of this split")
        if category not in class_of:
            ignored += 1
            continue
        rows[image_id].append((x, y, x + w, y + h, score, class_of[category]))
    out = {}
    for image_id, values in rows.items():
        array = np.asarray(values, dtype=np.float64)
        out[image_id] = Detections(array[:, :4], array[:, 4], array[:, 5].astype(np.int64))
    if ignored:
        warnings.warn(
            f"{path}: {ignored} record(s) of a category id that is not a class of this dataset "
            f"(its ids: {list(category_ids)}) ignored, as pycocotools ignores them",
            stacklevel=3,
        )
    if float_ids:
        warnings.warn(f"{path}: {float_ids} id(s) written as floats (3.0) read as integers, as pycocotools reads them",
                      stacklevel=3)
    return Replayed(out, ignored, float_ids)


class ReplayAdapter(Adapter):
    """Saved detections instead of a model: ``predictions:PATH`` (no default)."""

    name = "predictions"
    default_checkpoint, prompt_modes, tasks = listed(name)
    repeatable = False
    option_defaults: ClassVar[dict[str, Any]] = {}
    submitted_output = True

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        if not self.checkpoint:
            raise ValueError(
                "the predictions adapter needs a path: predictions:PATH, a COCO results file "
                "or a folder of <dataset>.json files"
            )
        self.path = Path(self.checkpoint).expanduser()
        self.file: Path | None = None
        self._revision: str | None = None
        self.detections: dict[int, Detections] = {}
        self.ignored_records = 0
        """Records of the current task's file whose category id is not a class (not scored)."""
        self.ignored_in_all = 0
        self.float_ids = 0
        """Ids of the current task's file written as integral floats, read as integers."""
        self.float_ids_in_all = 0

    @property
    def revision(self) -> str | None:
        """A content hash of the file replayed for the current dataset."""
        return self._revision

    @property
    def is_smoke(self) -> bool:
        """A replay of a smoke run is a smoke run: the plugin writes what made each file beside
        it (``<split>.about.json``)."""
        if self.file is None:
            return False
        about = self.file.with_name(f"{self.file.stem}.about.json")
        try:
            return bool(json.loads(about.read_text(encoding="utf-8")).get("smoke"))
        except (OSError, ValueError, AttributeError):
            return False

    def answer_counts(self) -> dict[str, int]:
        counts = {"ignored_records": self.ignored_in_all}
        if self.float_ids_in_all:  # only when some were read: a file of integer ids keeps the counts it had
            counts["float_ids"] = self.float_ids_in_all
        return counts

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        if not task.category_ids:
            raise ValueError(
                f"replaying predictions for {task.dataset!r} needs the export's category ids (task.category_ids)"
            )
        if not task.image_ids:
            warnings.warn(
                f"{task.dataset}: the split's image ids were not given, so records of unknown images go unreported",
                stacklevel=2,
            )
        self.file = predictions_file(self.path, task.dataset, task.split)
        replayed = read_predictions(self.file, task.category_ids, task.image_ids)
        self.detections, self.ignored_records = replayed.detections, replayed.ignored
        self.float_ids = replayed.float_ids
        self.ignored_in_all += replayed.ignored
        self.float_ids_in_all += replayed.float_ids
        self._revision = file_revision(self.file)

    @classmethod
    def pair_revision(cls, checkpoint: str | None, dataset: str, split: str) -> str | None:
        """The content hash of the file the pair would replay (``None`` when there is none): a
        finished pair is reused as long as its file's bytes are the same."""
        try:
            return file_revision(predictions_file(Path(checkpoint or "").expanduser(), dataset, split))
        except (FileNotFoundError, OSError):
            return None

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        if self.task is None:
            raise RuntimeError("predictions: set_task must be called before predict")
        return [self.detections.get(item.image_id, Detections.empty()) for item in batch]
