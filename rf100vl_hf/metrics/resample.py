"""AP50:95 of resampled images, for bootstrap confidence intervals over the images of a split.

pycocotools matches detections to ground truth image by image (``COCOeval.evaluateImg``), then
``accumulate`` pools the matches of every image into precision-recall curves. A bootstrap
resample draws images with replacement; its AP is what pycocotools gives on the resampled
split, each drawn copy an image of its own (copies of an image listed together, in the
split's order). Matching depends on one image only, so it is done once, here with pycocotools
itself, and :meth:`ImageMatches.ap` pools it again for any number of copies of each image:
exactly COCOeval's ``accumulate`` on the resampled split, ties of scores included, in time
linear in the number of detections.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rf100vl_hf.boxes import MAX_DETECTIONS
from rf100vl_hf.metrics.backends import pycocotools_indexes
from rf100vl_hf.metrics.coco import _mean_defined
from rf100vl_hf.metrics.inputs import check_ground_truth, check_results

RECALL_THRESHOLDS = np.linspace(0.0, 1.0, 101)
"""pycocotools' ``recThrs``: the 101 recall points precision is read at."""
MATCHED, UNMATCHED, IGNORED = "matched", "unmatched", "ignored"
"""A detection's outcome at IoU 0.5: it found a box, found none, or matched a crowd box (not scored)."""


@dataclass(frozen=True)
class _Category:
    """One category's detections in ``accumulate``'s order (by score, then image, then rank in
    the image), with their matches at each IoU threshold and the boxes to find per image."""

    image: np.ndarray  # (D,) index of each detection's image
    run_start: np.ndarray  # (D,) first detection of its run (same image, same score)
    run_size: np.ndarray  # (D,) length of that run
    true_positive: np.ndarray  # (T, D) matched a box that counts
    false_positive: np.ndarray  # (T, D) matched nothing
    boxes: np.ndarray  # (I,) boxes of this category per image that count (not crowd)

    def precision(self, counts: np.ndarray) -> np.ndarray | None:
        """(T, R) interpolated precision with ``counts[i]`` copies of image ``i``; ``None`` when
        those images hold no box of this category (COCOeval leaves it undefined)."""
        to_find = float(np.dot(counts, self.boxes))
        if to_find == 0:
            return None
        repeats = counts[self.image]
        total = int(repeats.sum())
        thresholds = self.true_positive.shape[0]
        if total == 0:
            return np.zeros((thresholds, len(RECALL_THRESHOLDS)))
        order = self._resampled_order(repeats, total)
        tp = np.cumsum(self.true_positive[:, order], axis=1).astype(float)
        fp = np.cumsum(self.false_positive[:, order], axis=1).astype(float)
        recall = tp / to_find
        precision = tp / (fp + tp + np.spacing(1))
        precision = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]  # COCOeval's envelope
        out = np.zeros((thresholds, len(RECALL_THRESHOLDS)))
        for t in range(thresholds):
            found = np.searchsorted(recall[t], RECALL_THRESHOLDS, side="left")
            inside = found < total
            out[t, inside] = precision[t, found[inside]]
        return out

    def _resampled_order(self, repeats: np.ndarray, total: int) -> np.ndarray:
        """The detections of the resampled split in ``accumulate``'s order: each copy of an image
        follows the previous copy, so a run of tied scores in one image repeats as a whole."""
        source = np.repeat(np.arange(len(repeats)), repeats)
        before = np.cumsum(repeats) - repeats  # detections (copies counted) ahead of each one
        copy = np.arange(total) - before[source]
        position = before[self.run_start[source]] + copy * self.run_size[source] + source - self.run_start[source]
        order = np.empty(total, dtype=np.int64)
        order[position] = source
        return order


@dataclass(frozen=True)
class ImageMatches:
    """pycocotools' per-image matching of a split's predictions (area ``all``, maxDets 500 or the
    ``max_dets`` asked)."""

    image_ids: tuple[int, ...]  # in COCOeval's order (ascending)
    categories: tuple[_Category, ...]  # in ascending category id order
    outcomes: dict[int, str]  # index of a prediction -> its outcome at IoU 0.5 (scored ones only)

    def ap(self, counts: np.ndarray | None = None) -> float:
        """AP50:95 (a fraction) with ``counts[i]`` copies of image ``i`` (default: each once)."""
        counts = np.ones(len(self.image_ids), dtype=np.int64) if counts is None else np.asarray(counts)
        thresholds = self.categories[0].true_positive.shape[0]
        cells = np.full((thresholds, len(RECALL_THRESHOLDS), len(self.categories)), -1.0)
        for k, category in enumerate(self.categories):
            precision = category.precision(counts)
            if precision is not None:
                cells[:, :, k] = precision
        return _mean_defined(cells)


def match_images(ground_truth: dict[str, Any], predictions: Sequence[dict[str, Any]],
                 max_dets: int = MAX_DETECTIONS) -> ImageMatches:
    """Match COCO results records to a COCO ground truth, image by image, with pycocotools
    (inputs are checked as :func:`rf100vl_hf.metrics.evaluate` checks them), the best
    ``max_dets`` of each image and class (a row's ``max_dets``: 100 under ``rf-scripts``)."""
    from pycocotools.cocoeval import COCOeval

    gt = check_ground_truth(ground_truth, None)
    results = check_results(predictions, gt)
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints every step
        evaluator = COCOeval(*pycocotools_indexes(gt, results), "bbox")
        evaluator.params.maxDets = [max_dets]
        evaluator.params.areaRng, evaluator.params.areaRngLbl = [[0, 1e10]], ["all"]
        evaluator.evaluate()
    images = len(evaluator.params.imgIds)
    per_category = [evaluator.evalImgs[k * images:(k + 1) * images] for k in range(len(evaluator.params.catIds))]
    outcomes: dict[int, str] = {}
    for evaluated in per_category:
        for entry in evaluated:
            if entry is not None:
                for j, found, ignored in zip(entry["dtIds"], entry["dtMatches"][0], entry["dtIgnore"][0]):
                    outcomes[j - 1] = IGNORED if ignored else MATCHED if found else UNMATCHED  # ids count from 1
    thresholds = len(evaluator.params.iouThrs)
    return ImageMatches(  # the indexes' image ids are places in ascending order of the input's
        tuple(gt.image_ids.tolist()), tuple(_category(e, thresholds) for e in per_category), outcomes
    )


def _category(evaluated: list[dict[str, Any] | None], thresholds: int) -> _Category:
    """One category's matches, pooled in ``accumulate``'s order."""
    boxes = np.array([0 if e is None else int(np.count_nonzero(np.asarray(e["gtIgnore"]) == 0)) for e in evaluated])
    present = [(i, e) for i, e in enumerate(evaluated) if e is not None and e["dtScores"]]
    if not present:
        empty = np.zeros(0, dtype=np.int64)
        return _Category(empty, empty, empty, np.zeros((thresholds, 0), bool), np.zeros((thresholds, 0), bool), boxes)
    image = np.concatenate([np.full(len(e["dtScores"]), i) for i, e in present])
    scores = np.concatenate([e["dtScores"] for _, e in present])
    matched = np.concatenate([e["dtMatches"] for _, e in present], axis=1) != 0
    ignored = np.concatenate([e["dtIgnore"] for _, e in present], axis=1).astype(bool)
    order = np.argsort(-scores, kind="mergesort")  # accumulate's sort
    image, scores, matched, ignored = image[order], scores[order], matched[:, order], ignored[:, order]
    new_run = np.ones(len(order), dtype=bool)
    new_run[1:] = (image[1:] != image[:-1]) | (scores[1:] != scores[:-1])
    starts = np.flatnonzero(new_run)
    sizes = np.diff(np.append(starts, len(order)))
    run = np.cumsum(new_run) - 1
    return _Category(image, starts[run], sizes[run], matched & ~ignored, ~matched & ~ignored, boxes)
