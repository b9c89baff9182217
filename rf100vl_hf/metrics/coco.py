"""COCO box AP as RF100-VL reports it: pycocotools' ``COCOeval`` (bbox) at maxDets [1, 10, 500].

Every number is read from the accumulated ``precision`` and ``recall`` arrays at maxDets=500,
never from ``summarize()``, which hard-codes maxDets=100 for the headline AP (and reports -1
when 100 is not among the maxDets). ``max_dets=100`` scores as pycocotools' defaults do
(maxDets [1, 10, 100]: ``summarize()``'s ``stats[0]``), as Roboflow's public evaluation
scripts read it (the ``rf-scripts`` protocol, :mod:`rf100vl_hf.protocols`). Three backends compute those
arrays (:mod:`rf100vl_hf.metrics.backends`): hotcoco's Rust port (the default; its arrays equal
pycocotools'), faster-coco-eval's C++ matching and accumulation fed IoUs computed by
pycocotools' own formula (to 2.2e-16), and pycocotools itself (the reference). With
``explain``, the errors behind the AP come with it (:mod:`rf100vl_hf.metrics.errors`).

Inputs are plain COCO dicts, so the metric works on any export, not only on datasets built
by this package: a ground truth ``{"images", "annotations", "categories"}`` and predictions
in the COCO results format ``{"image_id", "category_id", "bbox": [x, y, w, h], "score"}``.
Every backend sees the same checked columns (:mod:`rf100vl_hf.metrics.inputs`), so a score
never depends on the backend: ids follow the one rule of :mod:`rf100vl_hf.ids` (a string id
such as ``"1"``, which pycocotools and faster-coco-eval match differently, is an error;
``1.0`` is read as ``1`` and counted), numbers must be numbers, and ``iscrowd`` 0 or 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from rf100vl_hf.arrow import arrow_columns
from rf100vl_hf.boxes import MAX_DETECTIONS
from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics.backends import BACKENDS, MAX_DETS, hotcoco_evaluator
from rf100vl_hf.metrics.errors import ErrorAnalysis, analyse
from rf100vl_hf.metrics.inputs import ARRAY_COLUMNS, GROUND_TRUTH, PREDICTIONS, check_ground_truth, check_results

if TYPE_CHECKING:
    import datasets

__all__ = [
    "ARRAY_COLUMNS", "BACKENDS", "GROUND_TRUTH", "MAX_DETS", "PREDICTIONS", "CocoScores", "coco_ground_truth",
    "evaluate",
]


@dataclass(frozen=True)
class CocoScores:
    """Box AP and AR at maxDets ``max_dets`` (500, the benchmark's), as fractions in [0, 1]; NaN
    where undefined (no ground truth)."""

    ap: float  # AP50:95, the benchmark's headline number
    ap50: float
    ap75: float
    ap_small: float
    ap_medium: float
    ap_large: float
    ar: float  # AR at max_dets (rows call it ar500, or ar100 at maxDets 100)
    per_class: dict[str, float]  # class name -> AP50:95; NaN for a class with no ground-truth box
    n_images: int
    n_predictions: int
    per_class_ap50: dict[str, float] = field(default_factory=dict)  # class name -> AP50; NaN as per_class
    per_class_instances: dict[str, int] = field(default_factory=dict)  # class name -> non-crowd boxes
    float_ids: int = 0  # ids of the dicts written as integral floats (3.0), read as integers
    max_dets: int = MAX_DETECTIONS
    errors: ErrorAnalysis | None = None  # with ``explain``: why the AP is what it is
    image_ids: tuple[int, ...] = ()  # the ground truth's image ids in ascending order (``errors`` names their places)

    @property
    def ar_column(self) -> str:
        """The name of :attr:`ar` in a results row and in :meth:`percent`: ``ar500`` or ``ar100``."""
        return f"ar{self.max_dets}"

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
        names = ("ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large")
        return {**{name: round(100 * getattr(self, name), decimals) for name in names},
                self.ar_column: round(100 * self.ar, decimals)}


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
    columns = arrow_columns(dataset, ["image_id", "width", "height", "objects"]).to_pydict()
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


# ---------------------------------------------------------------- scores


def _mean_defined(values: np.ndarray) -> float:
    """COCOeval's mean over cells that are defined (-1 marks a class/area with no ground truth)."""
    defined = values[values > -1]
    return float(defined.mean()) if defined.size else math.nan


def evaluate(
    ground_truth: dict[str, Any],
    predictions: Sequence[dict[str, Any]] | np.ndarray,
    backend: str = "hotcoco",
    class_names: Sequence[str] | None = None,
    max_dets: int = MAX_DETECTIONS,
    explain: bool = False,
) -> CocoScores:
    """Box AP of COCO-format predictions against a COCO ground truth, at maxDets ``max_dets``
    (500, the benchmark's; 100 scores as pycocotools' defaults do).

    ``predictions`` are COCO result dicts ``{image_id, category_id, bbox: [x, y, w, h] px,
    score}``, or an ``(N, 7)`` array with columns :data:`ARRAY_COLUMNS`; none at all scores 0.
    A prediction for an image or category that is not in the ground truth is an error (COCOeval
    would drop an unknown category silently), as is a non-finite box or score, and an id that
    is not an integer (:mod:`rf100vl_hf.ids`: the string ``"1"`` is refused, ``1.0`` is read as
    ``1`` and counted in ``float_ids``). ``class_names`` overrides the
    categories' names for ``per_class``, in ascending category id order. The ground truth's
    annotation ids are not read (a raw export's id 0 costs nothing), and neither input is
    modified or copied. ``explain`` adds the error analysis (:mod:`rf100vl_hf.metrics.errors`),
    from the default backend's own evaluator or, with another backend, from one made for it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown COCO backend {backend!r}; known: {', '.join(BACKENDS)}")
    gt = check_ground_truth(ground_truth, class_names)
    results = check_results(predictions, gt)
    accumulated = BACKENDS[backend](gt, results, max_dets)
    precision, recall = accumulated["precision"], accumulated["recall"]
    area = {label: i for i, label in enumerate(accumulated["areaRngLbl"])}
    iou = {t: int(np.flatnonzero(np.isclose(accumulated["iouThrs"], t))[0]) for t in (0.5, 0.75)}
    errors = None
    if explain:
        evaluator = accumulated.get("evaluator") or hotcoco_evaluator(gt, results, max_dets)
        errors = analyse(evaluator, results.scores, max_dets, int(gt.instances().sum()))
    at_last = precision[..., -1]  # [T, R, K, A] at max_dets
    return CocoScores(
        ap=_mean_defined(at_last[:, :, :, area["all"]]),
        ap50=_mean_defined(at_last[iou[0.5], :, :, area["all"]]),
        ap75=_mean_defined(at_last[iou[0.75], :, :, area["all"]]),
        ap_small=_mean_defined(at_last[:, :, :, area["small"]]),
        ap_medium=_mean_defined(at_last[:, :, :, area["medium"]]),
        ap_large=_mean_defined(at_last[:, :, :, area["large"]]),
        ar=_mean_defined(recall[:, :, area["all"], -1]),
        per_class={name: _mean_defined(at_last[:, :, k, area["all"]]) for k, name in enumerate(gt.category_names)},
        n_images=len(gt.image_ids),
        n_predictions=len(results.scores),
        per_class_ap50={name: _mean_defined(at_last[iou[0.5], :, k, area["all"]])
                        for k, name in enumerate(gt.category_names)},
        per_class_instances=dict(zip(gt.category_names, gt.instances().tolist())),
        float_ids=gt.float_ids + results.float_ids,
        max_dets=max_dets,
        errors=errors,
        image_ids=tuple(gt.image_ids.tolist()),
    )
