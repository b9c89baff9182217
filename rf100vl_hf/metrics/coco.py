"""COCO box AP as RF100-VL reports it: pycocotools' ``COCOeval`` (bbox) at maxDets [1, 10, 500].

Every number is read from the accumulated ``precision`` and ``recall`` arrays at maxDets=500,
never from ``summarize()``, which hard-codes maxDets=100 for the headline AP (and reports -1
when 100 is not among the maxDets). Two backends compute those arrays: faster-coco-eval's
``COCOeval_faster`` (the default; C++ matching, identical arrays to within 2e-16) and
pycocotools itself (the reference).

Inputs are plain COCO dicts, so the metric works on any export, not only on datasets built
by this package: a ground truth ``{"images", "annotations", "categories"}`` and predictions
in the COCO results format ``{"image_id", "category_id", "bbox": [x, y, w, h], "score"}``.
Both backends see the same checked private copy, so a score never depends on the backend:
ids follow the one rule of :mod:`rf100vl_hf.ids` (a string id such as ``"1"``, which
pycocotools and faster-coco-eval match differently, is an error; ``1.0`` is read as ``1``
and counted), numbers must be numbers, and ``iscrowd`` 0 or 1.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from rf100vl_hf.boxes import MAX_DETECTIONS
from rf100vl_hf.errors import DataError, shown
from rf100vl_hf.ids import id_column

if TYPE_CHECKING:
    import datasets

MAX_DETS: tuple[int, ...] = (1, 10, MAX_DETECTIONS)
"""The benchmark's maxDets: AP and AR are read at the last one."""

GROUND_TRUTH = "ground truth"
PREDICTIONS = "predictions"
"""What a :class:`DataError` names when the bad input is an in-memory dict, not a file."""

ARRAY_COLUMNS = ("image_id", "x", "y", "w", "h", "score", "category_id")
"""Column order of predictions given as an ``(N, 7)`` array (pycocotools' ``loadNumpyAnnotations``)."""


@dataclass(frozen=True)
class CocoScores:
    """Box AP and AR at maxDets=500, as fractions in [0, 1]; NaN where undefined (no ground truth)."""

    ap: float  # AP50:95, the benchmark's headline number
    ap50: float
    ap75: float
    ap_small: float
    ap_medium: float
    ap_large: float
    ar500: float
    per_class: dict[str, float]  # class name -> AP50:95; NaN for a class with no ground-truth box
    n_images: int
    n_predictions: int
    per_class_ap50: dict[str, float] = field(default_factory=dict)  # class name -> AP50; NaN as per_class
    per_class_instances: dict[str, int] = field(default_factory=dict)  # class name -> non-crowd boxes
    float_ids: int = 0  # ids of the dicts written as integral floats (3.0), read as integers

    def class_rows(self) -> list[dict[str, Any]]:
        """Per-class results as results rows carry them: ``{class, ap, ap50, n_instances}``, AP in
        percent (None where undefined), in class order."""
        def percent(value: float) -> float | None:
            return None if math.isnan(value) else 100 * value

        return [
            {"class": name, "ap": percent(ap), "ap50": percent(self.per_class_ap50.get(name, math.nan)),
             "n_instances": self.per_class_instances.get(name)}
            for name, ap in self.per_class.items()
        ]

    def percent(self, decimals: int = 1) -> dict[str, float]:
        """The headline numbers in percent, rounded as the paper's tables print them."""
        names = ("ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar500")
        return {name: round(100 * getattr(self, name), decimals) for name in names}


# ---------------------------------------------------------------- ground truth from a dataset


def _dataset_label(dataset: datasets.Dataset) -> str:
    info = dataset.info
    name = info.config_name or info.dataset_name or "dataset"
    return f"{name}[{dataset.split}]" if dataset.split else name


def coco_ground_truth(dataset: datasets.Dataset, category_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """The COCO ground-truth dict of a split loaded with rf100vl_hf, without decoding an image.

    Image ids are the rows' ``image_id``, annotation ids the rows' ``objects.id`` (numbered from
    1 by the builder: an id 0 is refused, because plain pycocotools scores a match to it as a
    false positive). ``category_ids`` gives the category id of each class index, e.g. the
    export's own ids from ``read_metadata(ds)["category_ids"]``, so that predictions written
    with those ids score; by default class index ``i`` has category id ``i + 1``.
    """
    label = _dataset_label(dataset)
    names = list(dataset.features["objects"]["category"].feature.names)
    if category_ids is None:
        category_ids = range(1, len(names) + 1)
    category_ids = [int(c) for c in category_ids]
    if len(category_ids) != len(names):
        raise DataError(
            label, "category_ids", f"{len(category_ids)} ids given for {len(names)} classes ({', '.join(names)})"
        )
    if len(set(category_ids)) != len(category_ids):
        raise DataError(label, "category_ids", f"ids repeat: {category_ids}")
    columns = dataset.select_columns(["image_id", "width", "height", "objects"]).to_dict()
    images, annotations = [], []
    for image_id, width, height, objects in zip(
        columns["image_id"], columns["width"], columns["height"], columns["objects"]
    ):
        images.append({"id": image_id, "width": width, "height": height})
        for ann_id, bbox, category, area, iscrowd in zip(
            objects["id"], objects["bbox"], objects["category"], objects["area"], objects["iscrowd"]
        ):
            if ann_id == 0:
                raise DataError(
                    label,
                    f"objects.id (image_id {image_id})",
                    "annotation id 0: pycocotools counts a match to it as a false positive; "
                    "number annotations from 1",
                )
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": image_id,
                    "category_id": category_ids[category],
                    "bbox": bbox,
                    "area": area,
                    "iscrowd": iscrowd,
                }
            )
    categories = [{"id": cid, "name": name} for cid, name in zip(category_ids, names)]
    return {"images": images, "annotations": annotations, "categories": categories}


# ---------------------------------------------------------------- input checks


def _column(records: Sequence[Any], key: str, source: str, where: str) -> list[Any]:
    """``record[key]`` of every record, or an error naming the first record without it.

    ``where`` names a record's field with ``{}`` for its index, e.g. ``"annotations[{}].bbox"``.
    """
    try:
        return [record[key] for record in records]
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
    return array.astype(np.float64).reshape(shape)


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


def _ids(
    values: Sequence[Any], source: str, where: str, known: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """Ids as an int64 array (:mod:`rf100vl_hf.ids`) and how many were written as floats; with
    ``known``, every id must be one of them."""
    ids, floats = id_column(values, source, where)
    if known is not None:
        unknown = np.flatnonzero(~np.isin(ids, known))
        if unknown.size:
            first = int(unknown[0])
            raise DataError(
                source,
                where.format(first),
                f"id {int(ids[first])} is not in the ground truth ({unknown.size} such records in all)",
            )
    return ids, floats


def _unique_ids(records: Sequence[Any], what: str) -> tuple[np.ndarray, int]:
    ids, floats = _ids(_column(records, "id", GROUND_TRUTH, f"{what}[{{}}].id"), GROUND_TRUTH, f"{what}[{{}}].id")
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise DataError(GROUND_TRUTH, f"{what}[].id", f"id {int(values[counts > 1][0])} repeats")
    return ids, floats


def _iscrowd(annotations: Sequence[dict[str, Any]]) -> list[int]:
    """Each annotation's crowd flag: 0 or 1, 0 when absent (as in COCO).

    Anything else is an error: pycocotools takes any truthy value (``"0"`` among them) for a
    crowd, faster-coco-eval reads a number, so the two would score it differently.
    """
    flags = []
    for i, ann in enumerate(annotations):
        value = ann.get("iscrowd", 0)
        if value not in (0, 1):
            raise DataError(GROUND_TRUTH, f"annotations[{i}].iscrowd", f"expected 0 or 1, found {shown(value)}")
        flags.append(int(value))
    return flags


@dataclass(frozen=True)
class _GroundTruth:
    """A private, checked copy of a COCO ground truth, ready for either backend."""

    dataset: dict[str, Any]
    image_ids: np.ndarray  # the input's ids, ascending
    category_ids: np.ndarray  # the input's ids, ascending
    category_names: list[str]  # in ascending category id order, as COCOeval orders them
    float_ids: int  # ids written as integral floats


def _ranks(ids: np.ndarray, known: np.ndarray) -> list[int]:
    """Each id's 1-based place among the ``known`` ids (ascending): the ids the backends see."""
    return (np.searchsorted(known, ids) + 1).tolist()


def _ground_truth(ground_truth: dict[str, Any], class_names: Sequence[str] | None) -> _GroundTruth:
    """Check the dict and copy it with its ids renumbered: annotations from 1, images and
    categories by their place in ascending order.

    Renumbering makes an export's annotation id 0 (which pycocotools scores as a false
    positive when matched) or repeated ids (which its index silently collapses) harmless;
    the ids carry no meaning for the score. Image and category ids keep their order, the one
    COCOeval sorts by (and breaks ties of equal scores by), so nothing it computes changes,
    while both backends see the same small integers: faster-coco-eval holds ids as doubles,
    which merge two ids above 2**53. A missing ``iscrowd`` means 0, as in COCO.
    """
    for key in ("images", "annotations", "categories"):
        if not isinstance(ground_truth.get(key), list):
            raise DataError(GROUND_TRUTH, key, "missing, or not a list")
    images, annotations, categories = ground_truth["images"], ground_truth["annotations"], ground_truth["categories"]
    (image_ids, image_floats), (category_ids, category_floats) = (
        _unique_ids(images, "images"), _unique_ids(categories, "categories")
    )
    references, float_ids = {}, image_floats + category_floats
    for key, known in (("image_id", image_ids), ("category_id", category_ids)):
        where = f"annotations[{{}}].{key}"
        references[key], floats = _ids(_column(annotations, key, GROUND_TRUTH, where), GROUND_TRUTH, where, known)
        float_ids += floats
    for key, width in (("bbox", 4), ("area", None)):
        where = f"annotations[{{}}].{key}"
        _numbers(_column(annotations, key, GROUND_TRUTH, where), GROUND_TRUTH, where, width)
    if class_names is None:
        names = [str(name) for name in _column(categories, "name", GROUND_TRUTH, "categories[{}].name")]
    elif len(class_names) != len(categories):
        raise DataError("class_names", "length", f"{len(class_names)} names for {len(categories)} categories")
    order = np.argsort(category_ids, kind="stable")
    names = [names[i] for i in order] if class_names is None else list(class_names)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DataError(GROUND_TRUTH, "categories[].name", f"class names repeat: {', '.join(repeated)}")
    known_images, known_categories = np.sort(image_ids), np.sort(category_ids)
    dataset = {
        "images": [{**image, "id": rank} for image, rank in zip(images, _ranks(image_ids, known_images))],
        "annotations": [
            {**ann, "id": i, "image_id": image, "category_id": category, "iscrowd": iscrowd}
            for i, (ann, image, category, iscrowd) in enumerate(
                zip(annotations, _ranks(references["image_id"], known_images),
                    _ranks(references["category_id"], known_categories), _iscrowd(annotations)),
                start=1,
            )
        ],
        "categories": [{**category, "id": rank}
                       for category, rank in zip(categories, _ranks(category_ids, known_categories))],
    }
    return _GroundTruth(dataset, known_images, known_categories, names, float_ids)


def _results(
    predictions: Sequence[dict[str, Any]] | np.ndarray, gt: _GroundTruth
) -> tuple[list[dict[str, Any]], int]:
    """Checked COCO result records with the fields ``loadRes`` would add (id, area, iscrowd),
    and how many of their ids were written as floats.

    Built directly rather than through ``loadRes``, which raises on an empty list, writes into
    the caller's dicts and adds a polygon per box that box AP never reads.
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
    image_ids, image_floats = _ids(columns["image_id"], PREDICTIONS, where["image_id"], gt.image_ids)
    category_ids, category_floats = _ids(columns["category_id"], PREDICTIONS, where["category_id"], gt.category_ids)
    boxes = _numbers(columns["bbox"], PREDICTIONS, where["bbox"], 4)
    scores = _numbers(columns["score"], PREDICTIONS, where["score"])
    negative = np.flatnonzero((boxes[:, 2:] < 0).any(axis=1))
    if negative.size:
        raise DataError(
            PREDICTIONS,
            where["bbox"].format(negative[0]),
            f"negative width or height in {boxes[negative[0]].tolist()} (COCO boxes are [x, y, w, h])",
        )
    areas = boxes[:, 2] * boxes[:, 3]
    records = [
        {"id": i, "image_id": image, "category_id": cat, "bbox": box, "score": score, "area": area, "iscrowd": 0}
        for i, (image, cat, box, score, area) in enumerate(
            zip(_ranks(image_ids, gt.image_ids), _ranks(category_ids, gt.category_ids), boxes.tolist(),
                scores.tolist(), areas.tolist()),
            start=1,
        )
    ]
    return records, image_floats + category_floats


# ---------------------------------------------------------------- backends


def _quiet(*args: Any) -> None:
    """faster-coco-eval's print function: the metric reports through its return value only."""


def _accumulate_faster(ground_truth: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    from faster_coco_eval import COCO, COCOeval_faster

    evaluator = COCOeval_faster(
        _index(COCO, ground_truth), _index(COCO, _results_dataset(ground_truth, results)), "bbox",
        print_function=_quiet,
    )
    return _run(evaluator)


def _accumulate_pycocotools(ground_truth: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints every step
        evaluator = COCOeval(
            _index(COCO, ground_truth), _index(COCO, _results_dataset(ground_truth, results)), "bbox"
        )
        return _run(evaluator)


BACKENDS: dict[str, Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, np.ndarray]]] = {
    "faster-coco-eval": _accumulate_faster,
    "pycocotools": _accumulate_pycocotools,
}
"""Backend name -> a function from (ground truth, results) to COCOeval's accumulated precision and
recall arrays, with the IoU thresholds and area labels that index them."""


def _index(coco_class: type, dataset: dict[str, Any]) -> Any:
    coco = coco_class()
    coco.dataset = dataset
    coco.createIndex()
    return coco


def _results_dataset(ground_truth: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"images": ground_truth["images"], "categories": ground_truth["categories"], "annotations": results}


def _run(evaluator: Any) -> dict[str, np.ndarray]:
    evaluator.params.maxDets = list(MAX_DETS)
    evaluator.evaluate()
    evaluator.accumulate()
    params = evaluator.params
    return {
        "precision": np.asarray(evaluator.eval["precision"]),  # [T, R, K, A, M]
        "recall": np.asarray(evaluator.eval["recall"]),  # [T, K, A, M]
        "iouThrs": np.asarray(params.iouThrs),
        "areaRngLbl": list(params.areaRngLbl),
    }


# ---------------------------------------------------------------- scores


def _mean_defined(values: np.ndarray) -> float:
    """COCOeval's mean over cells that are defined (-1 marks a class/area with no ground truth)."""
    defined = values[values > -1]
    return float(defined.mean()) if defined.size else math.nan


def evaluate(
    ground_truth: dict[str, Any],
    predictions: Sequence[dict[str, Any]] | np.ndarray,
    backend: str = "faster-coco-eval",
    class_names: Sequence[str] | None = None,
) -> CocoScores:
    """Box AP of COCO-format predictions against a COCO ground truth, at maxDets=500.

    ``predictions`` are COCO result dicts ``{image_id, category_id, bbox: [x, y, w, h] px,
    score}``, or an ``(N, 7)`` array with columns :data:`ARRAY_COLUMNS`; none at all scores 0.
    A prediction for an image or category that is not in the ground truth is an error (COCOeval
    would drop an unknown category silently), as is a non-finite box or score, and an id that
    is not an integer (:mod:`rf100vl_hf.ids`: the string ``"1"`` is refused, ``1.0`` is read as
    ``1`` and counted in ``float_ids``). ``class_names`` overrides the
    categories' names for ``per_class``, in ascending category id order. The ground truth's
    annotation ids are renumbered on a private copy, so a raw export's id 0 costs nothing;
    neither input is modified.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown COCO backend {backend!r}; known: {', '.join(BACKENDS)}")
    gt = _ground_truth(ground_truth, class_names)
    results, float_ids = _results(predictions, gt)
    accumulated = BACKENDS[backend](gt.dataset, results)
    precision, recall = accumulated["precision"], accumulated["recall"]
    area = {label: i for i, label in enumerate(accumulated["areaRngLbl"])}
    iou = {t: int(np.flatnonzero(np.isclose(accumulated["iouThrs"], t))[0]) for t in (0.5, 0.75)}
    at_500 = precision[..., -1]  # [T, R, K, A]
    return CocoScores(
        ap=_mean_defined(at_500[:, :, :, area["all"]]),
        ap50=_mean_defined(at_500[iou[0.5], :, :, area["all"]]),
        ap75=_mean_defined(at_500[iou[0.75], :, :, area["all"]]),
        ap_small=_mean_defined(at_500[:, :, :, area["small"]]),
        ap_medium=_mean_defined(at_500[:, :, :, area["medium"]]),
        ap_large=_mean_defined(at_500[:, :, :, area["large"]]),
        ar500=_mean_defined(recall[:, :, area["all"], -1]),
        per_class={name: _mean_defined(at_500[:, :, k, area["all"]]) for k, name in enumerate(gt.category_names)},
        n_images=len(gt.image_ids),
        n_predictions=len(results),
        per_class_ap50={name: _mean_defined(at_500[iou[0.5], :, k, area["all"]])
                        for k, name in enumerate(gt.category_names)},
        per_class_instances=_instances(gt),
        float_ids=gt.float_ids + float_ids,
    )


def _instances(gt: _GroundTruth) -> dict[str, int]:
    """Non-crowd ground-truth boxes per class (crowd boxes are never matched for a true positive)."""
    counts = [0] * len(gt.category_names)  # the copy's category ids are places in that order, from 1
    for ann in gt.dataset["annotations"]:
        if not ann["iscrowd"]:
            counts[ann["category_id"] - 1] += 1
    return dict(zip(gt.category_names, counts))
