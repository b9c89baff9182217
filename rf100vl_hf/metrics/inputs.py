"""A COCO ground truth and COCO results, checked and read into typed columns that either
scoring backend takes as they are.

The checks are the metric's contract (README, *Metrics without pytest*; ``docs/data.md``,
*Ids*): ids follow the one rule of :mod:`rf100vl_hf.ids`, boxes, areas and scores are finite
numbers, ``iscrowd`` is 0 or 1, every prediction names an image and a category of the
ground truth. They run over whole columns with numpy: Python touches each record once, to
read its fields; only a column that fails, or holds something other than plain ints and
floats, goes value by value, so that the error names the first bad record.

Image and category ids become their places in ascending order, and annotations and
predictions their places in the input, which is all COCOeval reads of them: it sorts by id
and breaks ties of equal scores by that order. An export's annotation id 0 (which
pycocotools scores as a false positive when matched) or repeated annotation ids (which its
index collapses) are so harmless, and ids above 2**53, which faster-coco-eval holds as
doubles, never reach it. Neither input is modified or copied.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Sequence

import numpy as np

from rf100vl_hf.errors import DataError, shown
from rf100vl_hf.ids import ID_LIMIT, id_column

GROUND_TRUTH = "ground truth"
PREDICTIONS = "predictions"
"""What a :class:`DataError` names when the bad input is an in-memory dict, not a file."""

ARRAY_COLUMNS = ("image_id", "x", "y", "w", "h", "score", "category_id")
"""Column order of predictions given as an ``(N, 7)`` array (pycocotools' ``loadNumpyAnnotations``)."""


@dataclass(frozen=True)
class GroundTruth:
    """A checked COCO ground truth: one row per annotation, in the input's order."""

    image_ids: np.ndarray  # (I,) the input's image ids, ascending
    category_ids: np.ndarray  # (K,) the input's category ids, ascending
    category_names: list[str]  # in ascending category id order, as COCOeval orders them
    float_ids: int  # ids written as integral floats (3.0)
    image: np.ndarray  # (N,) int64: each annotation's image, as its place in ``image_ids``
    category: np.ndarray  # (N,) int64: its category, as its place in ``category_ids``
    boxes: np.ndarray  # (N, 4) float64 [x, y, w, h]
    areas: np.ndarray  # (N,) float64: the annotation's ``area``, which COCOeval's area ranges read
    crowd: np.ndarray  # (N,) bool: ``iscrowd``

    def instances(self) -> np.ndarray:
        """(K,) non-crowd boxes per category: crowd boxes are never matched for a true positive."""
        return np.bincount(self.category[~self.crowd], minlength=len(self.category_ids))


@dataclass(frozen=True)
class Results:
    """Checked COCO results against a :class:`GroundTruth`: one row per prediction, in the
    input's order."""

    image: np.ndarray  # (D,) int64: place in the ground truth's ``image_ids``
    category: np.ndarray  # (D,) int64: place in its ``category_ids``
    boxes: np.ndarray  # (D, 4) float64 [x, y, w, h]
    scores: np.ndarray  # (D,) float64
    float_ids: int  # ids written as integral floats (3.0)

    @property
    def areas(self) -> np.ndarray:
        """Box areas, w * h, as pycocotools' ``loadRes`` computes them for the area ranges."""
        return self.boxes[:, 2] * self.boxes[:, 3]


# ---------------------------------------------------------------- columns


def _column(records: Sequence[Any], key: str, source: str, where: str) -> list[Any]:
    """``record[key]`` of every record, or an error naming the first record without it.

    ``where`` names a record's field with ``{}`` for its index, e.g. ``"annotations[{}].bbox"``.
    """
    try:
        return list(map(itemgetter(key), records))
    except (KeyError, TypeError, IndexError):
        for i, record in enumerate(records):
            if not isinstance(record, dict) or key not in record:
                raise DataError(source, where.format(i), f"missing (record: {record!r:.200})") from None
        raise


def _as_numbers(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as a float64 array of ``shape``; a TypeError or ValueError when it holds
    anything but numbers (numpy would read the string ``"3"`` as 3, which the backends do not)."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"not numbers: {array.dtype}")
    return array.astype(np.float64, copy=False).reshape(shape)


def _numbers(values: Sequence[Any], source: str, where: str, width: int | None = None) -> np.ndarray:
    """Values as a float64 array (``(N, width)`` when ``width`` is given), or an error naming the bad one."""
    shape = (len(values),) if width is None else (len(values), width)
    try:
        array = _as_numbers(values, shape)
    except (TypeError, ValueError):
        for i, value in enumerate(values):
            try:
                _as_numbers(value, shape[1:])
            except (TypeError, ValueError):
                expected = f"{width} numbers" if width else "a number"
                raise DataError(source, where.format(i), f"expected {expected}, found {value!r:.200}") from None
        raise
    bad = np.flatnonzero(~np.isfinite(array.reshape(shape[0], width or 1)).all(axis=1))
    if bad.size:
        raise DataError(
            source, where.format(bad[0]), f"not finite: {values[bad[0]]!r} ({bad.size} such values in all)"
        )
    return array


def _id_values(values: Sequence[Any] | np.ndarray, source: str, where: str) -> tuple[np.ndarray, int]:
    """Ids as an int64 array and how many were written as floats (:mod:`rf100vl_hf.ids`).

    A column of plain ints, or of plain floats, is read at once; anything else (a string, a
    boolean, numpy scalars, a mix) goes through :func:`rf100vl_hf.ids.id_column` value by
    value, which reads it by the same rule and names the first value it refuses.
    """
    if not isinstance(values, np.ndarray):
        kinds = set(map(type, values))
        if kinds <= {int}:
            try:
                return np.array(values, dtype=np.int64), 0
            except OverflowError:  # beyond 64 bits: id_column names it
                pass
        elif kinds == {float}:
            floats = np.array(values, dtype=np.float64)
            if (np.isfinite(floats) & (floats == np.round(floats)) & (floats >= -ID_LIMIT) & (floats < ID_LIMIT)).all():
                return floats.astype(np.int64), len(floats)
    return id_column(values, source, where)


def _places(ids: np.ndarray, known: np.ndarray, source: str, where: str) -> np.ndarray:
    """Each id's place among the ``known`` ids (ascending), or an error naming the first unknown one."""
    places = np.searchsorted(known, ids)
    unknown = np.flatnonzero(known[np.minimum(places, len(known) - 1)] != ids) if len(known) else np.arange(len(ids))
    if unknown.size:
        first = int(unknown[0])
        raise DataError(
            source, where.format(first),
            f"id {int(ids[first])} is not in the ground truth ({unknown.size} such records in all)",
        )
    return places


def _unique_ids(records: Sequence[Any], what: str) -> tuple[np.ndarray, int]:
    where = f"{what}[{{}}].id"
    ids, floats = _id_values(_column(records, "id", GROUND_TRUTH, where), GROUND_TRUTH, where)
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise DataError(GROUND_TRUTH, f"{what}[].id", f"id {int(values[counts > 1][0])} repeats")
    return ids, floats


def _iscrowd(annotations: Sequence[dict[str, Any]]) -> np.ndarray:
    """Each annotation's crowd flag: 0 or 1, 0 when absent (as in COCO).

    Anything else is an error: pycocotools takes any truthy value (``"0"`` among them) for a
    crowd, faster-coco-eval reads a number, so the two would score it differently.
    """
    values = [ann.get("iscrowd", 0) for ann in annotations]
    if set(map(type, values)) <= {int}:
        with contextlib.suppress(OverflowError):  # beyond 64 bits: named below
            flags = np.array(values, dtype=np.int64)
            if ((flags == 0) | (flags == 1)).all():
                return flags == 1
    for i, value in enumerate(values):
        if value not in (0, 1):
            raise DataError(GROUND_TRUTH, f"annotations[{i}].iscrowd", f"expected 0 or 1, found {shown(value)}")
    return np.array([bool(value) for value in values], dtype=bool)


# ---------------------------------------------------------------- the two inputs


def check_ground_truth(ground_truth: dict[str, Any], class_names: Sequence[str] | None) -> GroundTruth:
    """The checked columns of a COCO ground truth ``{"images", "annotations", "categories"}``;
    ``class_names`` replaces the categories' names, in ascending category id order."""
    for key in ("images", "annotations", "categories"):
        if not isinstance(ground_truth.get(key), list):
            raise DataError(GROUND_TRUTH, key, "missing, or not a list")
    images, annotations, categories = ground_truth["images"], ground_truth["annotations"], ground_truth["categories"]
    (image_ids, image_floats), (category_ids, category_floats) = (
        _unique_ids(images, "images"), _unique_ids(categories, "categories")
    )
    known_images, known_categories = np.sort(image_ids), np.sort(category_ids)
    places, float_ids = {}, image_floats + category_floats
    for key, known in (("image_id", known_images), ("category_id", known_categories)):
        where = f"annotations[{{}}].{key}"
        ids, floats = _id_values(_column(annotations, key, GROUND_TRUTH, where), GROUND_TRUTH, where)
        places[key] = _places(ids, known, GROUND_TRUTH, where)
        float_ids += floats
    boxes, areas = (
        _numbers(_column(annotations, key, GROUND_TRUTH, f"annotations[{{}}].{key}"), GROUND_TRUTH,
                 f"annotations[{{}}].{key}", width)
        for key, width in (("bbox", 4), ("area", None))
    )
    if class_names is None:
        names = [str(name) for name in _column(categories, "name", GROUND_TRUTH, "categories[{}].name")]
        names = [names[i] for i in np.argsort(category_ids, kind="stable")]
    elif len(class_names) != len(categories):
        raise DataError("class_names", "length", f"{len(class_names)} names for {len(categories)} categories")
    else:
        names = list(class_names)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DataError(GROUND_TRUTH, "categories[].name", f"class names repeat: {', '.join(repeated)}")
    return GroundTruth(
        known_images, known_categories, names, float_ids, places["image_id"], places["category_id"],
        boxes, areas, _iscrowd(annotations),
    )


def check_results(predictions: Sequence[dict[str, Any]] | np.ndarray, gt: GroundTruth) -> Results:
    """The checked columns of COCO results ``{image_id, category_id, bbox, score}`` (or an
    ``(N, 7)`` array with columns :data:`ARRAY_COLUMNS`) against a checked ground truth.

    What pycocotools' ``loadRes`` would add (an id, the box area, iscrowd 0) follows from the
    columns; ``loadRes`` itself raises on an empty list and writes into the caller's dicts.
    """
    if isinstance(predictions, np.ndarray):
        if predictions.ndim != 2 or predictions.shape[1] != len(ARRAY_COLUMNS):
            raise DataError(
                PREDICTIONS, "shape", f"expected (N, 7) columns {', '.join(ARRAY_COLUMNS)}; found {predictions.shape}"
            )
        columns = {
            "image_id": predictions[:, 0],
            "bbox": predictions[:, 1:5],
            "score": predictions[:, 5],
            "category_id": predictions[:, 6],
        }
        where = {"image_id": "[{}, 0]", "bbox": "[{}, 1:5]", "score": "[{}, 5]", "category_id": "[{}, 6]"}
    else:
        where = {key: f"[{{}}].{key}" for key in ("image_id", "category_id", "bbox", "score")}
        columns = {key: _column(predictions, key, PREDICTIONS, where[key]) for key in where}
    image_ids, image_floats = _id_values(columns["image_id"], PREDICTIONS, where["image_id"])
    image = _places(image_ids, gt.image_ids, PREDICTIONS, where["image_id"])
    category_ids, category_floats = _id_values(columns["category_id"], PREDICTIONS, where["category_id"])
    category = _places(category_ids, gt.category_ids, PREDICTIONS, where["category_id"])
    boxes = _numbers(columns["bbox"], PREDICTIONS, where["bbox"], 4)
    scores = _numbers(columns["score"], PREDICTIONS, where["score"])
    negative = np.flatnonzero((boxes[:, 2:] < 0).any(axis=1))
    if negative.size:
        raise DataError(
            PREDICTIONS,
            where["bbox"].format(negative[0]),
            f"negative width or height in {boxes[negative[0]].tolist()} (COCO boxes are [x, y, w, h])",
        )
    return Results(image, category, boxes, scores, image_floats + category_floats)
