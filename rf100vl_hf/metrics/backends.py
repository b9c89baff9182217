"""The three scoring backends: checked columns in, COCOeval's accumulated ``precision`` and
``recall`` arrays out (bbox, maxDets [1, 10, 500] or [1, 10, N], pycocotools' IoU thresholds and
area ranges).

- ``hotcoco`` (the default): hotcoco's Rust port of COCOeval, whose arrays equal pycocotools'
  exactly. It is given the columns as they are: the ground truth through ``COCO.from_arrays``
  and the results as one ``(N, 7)`` array through ``load_res``, with no dict per box. Its
  evaluator is kept (``evaluator``), so the error analysis (:mod:`rf100vl_hf.metrics.errors`)
  reads the same matching.
- ``faster-coco-eval``: faster-coco-eval's C++ matching and accumulation, fed
  directly: the IoUs of every image and category at once with numpy, by pycocotools' own
  box formula (``bbIou``, operation by operation, so every IoU is pycocotools' to the last
  bit), and the few fields its C++ reads of each box. Its Python layers (``loadRes``, the two
  ``COCO`` indexes, ``_prepare`` and an IoU call per image and category) are not needed: the
  columns are checked and grouped already. The arrays agree with pycocotools' to 2.2e-16:
  faster-coco-eval divides by tp + fp where pycocotools divides by tp + fp + eps.
- ``pycocotools``: ``COCOeval`` itself, the reference, on indexes built from the columns.
"""

from __future__ import annotations

import contextlib
import gc
import io
from collections import deque
from itertools import count
from typing import Any, Callable, Iterator

import numpy as np

from rf100vl_hf.boxes import MAX_DETECTIONS
from rf100vl_hf.metrics.inputs import GroundTruth, Results

MAX_DETS: tuple[int, ...] = (1, 10, MAX_DETECTIONS)
"""The benchmark's maxDets: AP and AR are read at the last one."""


def max_dets_of(last: int) -> list[int]:
    """COCOeval's ``maxDets`` ending at ``last`` (500: the benchmark's; 100: pycocotools' default)."""
    if not (isinstance(last, int) and last >= 10):
        raise ValueError(f"maxDets must be an integer of at least 10, not {last!r}")
    return [*MAX_DETS[:-1], last]

Accumulated = dict[str, Any]
"""``precision`` [T, R, K, A, M], ``recall`` [T, K, A, M], ``iouThrs`` [T] and ``areaRngLbl`` [A];
hotcoco's also its ``evaluator``."""


def _quiet(*args: Any) -> None:
    """faster-coco-eval's print function: the metric reports through its return value only."""


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a backend's input is built and read: hundreds
    of thousands of small lists and dicts, none of them in a cycle, would otherwise set off
    collections that walk every object of the process again and again (half the time of
    building the IoU lists of 300,000 detections)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# ---------------------------------------------------------------- hotcoco


def hotcoco_evaluator(gt: GroundTruth, results: Results, max_dets: int = MAX_DETECTIONS) -> Any:
    """hotcoco's ``COCOeval`` of the columns, evaluated and accumulated: images and categories by
    place (categories named, so its diagnostics name classes), annotations numbered from 1."""
    import hotcoco

    images = [{"id": i} for i in range(len(gt.image_ids))]
    categories = [{"id": k, "name": name} for k, name in enumerate(gt.category_names)]
    truth = hotcoco.COCO.from_arrays(images, categories, gt.image, gt.category, gt.boxes,
                                     ids=np.arange(1, len(gt.image) + 1), area=gt.areas, iscrowd=gt.crowd)
    rows = np.empty((len(results.scores), 7))
    rows[:, 0], rows[:, 1:5], rows[:, 5], rows[:, 6] = results.image, results.boxes, results.scores, results.category
    evaluator = hotcoco.COCOeval(truth, truth.load_res(rows), "bbox")
    evaluator.params.max_dets = max_dets_of(max_dets)
    evaluator.evaluate()
    evaluator.accumulate()
    return evaluator


def _accumulate_hotcoco(gt: GroundTruth, results: Results, max_dets: int = MAX_DETECTIONS) -> Accumulated:
    evaluator = hotcoco_evaluator(gt, results, max_dets)
    accumulated, params = evaluator.eval, evaluator.params
    return {
        "precision": accumulated["precision"],
        "recall": accumulated["recall"],
        "iouThrs": np.asarray(params.iou_thrs),
        "areaRngLbl": list(params.area_rng_lbl),
        "evaluator": evaluator,
    }


# ---------------------------------------------------------------- faster-coco-eval


def box_ious(gt: GroundTruth, results: Results, max_dets: int) -> list[list[Any]]:
    """COCOeval's IoUs, ``[image][category]`` -> rows of detections by score (the best
    ``max_dets``, input order breaking ties) by columns of ground-truth boxes (input order);
    ``[]`` where either is absent. The arithmetic is pycocotools' ``bbIou``, step by step."""
    n_categories = len(gt.category_ids)
    ious: list[list[Any]] = [[[]] * n_categories for _ in range(len(gt.image_ids))]
    if not (len(gt.image) and len(results.image)):
        return ious
    gt_pair, det_pair = gt.image * n_categories + gt.category, results.image * n_categories + results.category
    gt_order = np.argsort(gt_pair, kind="stable")
    gt_pairs, gt_start, gt_count = np.unique(gt_pair[gt_order], return_index=True, return_counts=True)
    det_order = np.lexsort((-results.scores, det_pair))  # stable: input order breaks ties
    _, det_start, det_count = np.unique(det_pair[det_order], return_index=True, return_counts=True)
    rank = np.arange(len(det_order)) - np.repeat(det_start, det_count)
    place = np.minimum(np.searchsorted(gt_pairs, det_pair[det_order]), len(gt_pairs) - 1)
    kept = (rank < max_dets) & (gt_pairs[place] == det_pair[det_order])
    detections, place = det_order[kept], place[kept]
    widths = gt_count[place]  # ground-truth boxes in each kept detection's pair
    det = np.repeat(detections, widths)
    within = np.arange(len(det)) - np.repeat(np.cumsum(widths) - widths, widths)
    ground = gt_order[np.repeat(gt_start[place], widths) + within]
    d, g = results.boxes[det], gt.boxes[ground]
    w = np.minimum(d[:, 2] + d[:, 0], g[:, 2] + g[:, 0]) - np.maximum(d[:, 0], g[:, 0])
    h = np.minimum(d[:, 3] + d[:, 1], g[:, 3] + g[:, 1]) - np.maximum(d[:, 1], g[:, 1])
    inter = w * h
    detection_area = d[:, 2] * d[:, 3]
    union = np.where(gt.crowd[ground], detection_area, detection_area + g[:, 2] * g[:, 3] - inter)
    with np.errstate(divide="ignore", invalid="ignore"):
        flat = np.where((w > 0) & (h > 0), inter / union, 0.0)
    pairs, rows = np.unique(det_pair[detections], return_counts=True)
    columns = gt_count[np.searchsorted(gt_pairs, pairs)]
    starts = np.cumsum(rows * columns) - rows * columns
    shapes, shape_of = np.unique(np.stack([rows, columns], axis=1), axis=0, return_inverse=True)
    for s, (n_rows, n_columns) in enumerate(shapes.tolist()):  # one tolist per shape of block, not per pair
        same = np.flatnonzero(shape_of.ravel() == s)
        blocks = flat[starts[same, None] + np.arange(n_rows * n_columns)].reshape(-1, n_rows, n_columns).tolist()
        for pair, block in zip(pairs[same].tolist(), blocks):
            ious[pair // n_categories][pair % n_categories] = block
    return ious


@_collector_paused()
def _accumulate_faster(gt: GroundTruth, results: Results, max_dets: int = MAX_DETECTIONS) -> Accumulated:
    import faster_coco_eval.faster_eval_api_cpp as engine  # the C++ core of COCOeval_faster
    from faster_coco_eval import COCOeval_faster

    evaluator = COCOeval_faster(iouType="bbox", print_function=_quiet)
    params = evaluator.params
    params.maxDets = max_dets_of(max_dets)
    params.imgIds, params.catIds = list(range(len(gt.image_ids))), list(range(len(gt.category_ids)))
    # the fields its C++ reads of a box; ids count from 1 (0 reads as "unmatched")
    boxes = [{"id": i, "area": area, "iscrowd": flag, "ignore": flag}
             for i, area, flag in zip(count(1), gt.areas.tolist(), gt.crowd.tolist())]
    detections = [{"id": i, "score": score, "area": area}
                  for i, score, area in zip(count(1), results.scores.tolist(), results.areas.tolist())]
    deque(map(evaluator.gt_dataset.append_ref, gt.image.tolist(), gt.category.tolist(), boxes), maxlen=0)
    deque(map(evaluator.dt_dataset.append_ref, results.image.tolist(), results.category.tolist(), detections),
          maxlen=0)
    accumulated = engine.COCOevalEvaluateAccumulate(
        params, box_ious(gt, results, params.maxDets[-1]), evaluator.gt_dataset, evaluator.dt_dataset,
        params.imgIds, params.catIds, True,
    )
    return {
        "precision": np.asarray(accumulated["precision"]),
        "recall": np.asarray(accumulated["recall"]),
        "iouThrs": np.asarray(params.iouThrs),
        "areaRngLbl": list(params.areaRngLbl),
    }


# ---------------------------------------------------------------- pycocotools


def pycocotools_indexes(gt: GroundTruth, results: Results) -> tuple[Any, Any]:
    """pycocotools ``COCO`` indexes of the ground truth and the results, as ``loadRes`` would
    make the latter: images and categories by place, annotations and results numbered from 1."""
    from pycocotools.coco import COCO

    images = [{"id": i} for i in range(len(gt.image_ids))]
    categories = [{"id": k} for k in range(len(gt.category_ids))]
    annotations = [
        {"id": i, "image_id": image, "category_id": category, "bbox": box, "area": area, "iscrowd": int(crowd)}
        for i, image, category, box, area, crowd in zip(
            count(1), gt.image.tolist(), gt.category.tolist(), gt.boxes.tolist(), gt.areas.tolist(),
            gt.crowd.tolist(),
        )
    ]
    records = [
        {"id": i, "image_id": image, "category_id": category, "bbox": box, "score": score, "area": area, "iscrowd": 0}
        for i, image, category, box, score, area in zip(
            count(1), results.image.tolist(), results.category.tolist(), results.boxes.tolist(),
            results.scores.tolist(), results.areas.tolist(),
        )
    ]
    indexes = []
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints every step
        for dataset in (annotations, records):
            coco = COCO()
            coco.dataset = {"images": images, "categories": categories, "annotations": dataset}
            coco.createIndex()
            indexes.append(coco)
    return indexes[0], indexes[1]


@_collector_paused()
def _accumulate_pycocotools(gt: GroundTruth, results: Results, max_dets: int = MAX_DETECTIONS) -> Accumulated:
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        evaluator = COCOeval(*pycocotools_indexes(gt, results), "bbox")
        evaluator.params.maxDets = max_dets_of(max_dets)
        evaluator.evaluate()
        evaluator.accumulate()
    params = evaluator.params
    return {
        "precision": np.asarray(evaluator.eval["precision"]),
        "recall": np.asarray(evaluator.eval["recall"]),
        "iouThrs": np.asarray(params.iouThrs),
        "areaRngLbl": list(params.areaRngLbl),
    }


BACKENDS: dict[str, Callable[[GroundTruth, Results, int], Accumulated]] = {
    "hotcoco": _accumulate_hotcoco,
    "faster-coco-eval": _accumulate_faster,
    "pycocotools": _accumulate_pycocotools,
}
"""Backend name -> a function from a checked ground truth, results and the last maxDets to
COCOeval's accumulated precision and recall arrays, with the IoU thresholds and area labels
that index them."""
