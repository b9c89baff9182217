"""Box conventions in one place: COCO ``[x, y, w, h]`` in pixels for data and evaluation,
``xyxy`` only as an intermediate that adapters produce and that is converted here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_DETECTIONS = 500
"""RF100-VL evaluates at maxDets=500, which pycocotools applies per image *and category*: it
scores the best 500 detections of each class on each image, so keeping those can never
change a score, while a cap of 500 per image across classes could (it may drop a class's
detections that pycocotools would score)."""


def xyxy_to_xywh(boxes: np.ndarray) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)


def xywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of two sets of ``xyxy`` boxes, shape ``(len(a), len(b))``."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(axis=2)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(axis=1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = np.where(union > 0, inter / union, 0.0)
    return iou


@dataclass(frozen=True)
class Sanitized:
    """Detections made safe to score, and what it took to make them so."""

    boxes: np.ndarray  # (N, 4) xyxy, float64 (inside the image unless sanitized with clip=False)
    scores: np.ndarray  # (N,)
    labels: np.ndarray  # (N,) int64
    non_finite: int  # dropped: NaN or infinite box or score
    truncated: int  # dropped: beyond the best ``max_detections`` of their image and class
    swapped: int = 0  # boxes given with x1 < x0 or y1 < y0, whose corners were put in order


def best_per_class(scores: np.ndarray, labels: np.ndarray, limit: int) -> np.ndarray:
    """Mask of the best ``limit`` detections of each class, ties broken by input order: what
    pycocotools' maxDets keeps of one image (a stable sort by descending score, per category)."""
    keep = np.zeros(len(scores), dtype=bool)
    order = np.argsort(-scores, kind="stable")
    for label in np.unique(labels):
        keep[order[labels[order] == label][:limit]] = True
    return keep


def sanitize_detections(
    boxes_xyxy: np.ndarray,
    scores: np.ndarray,
    labels: np.ndarray,
    width: int,
    height: int,
    max_detections: int = MAX_DETECTIONS,
    clip: bool = True,
) -> Sanitized:
    """Drop non-finite detections, put corners in order and clip boxes to the image, and keep
    the best ``max_detections`` of each class, as pycocotools' maxDets does (per image and
    category); the input order of what is kept is unchanged.

    Every model's output goes through here, so a model cannot crash the metric with NaN or
    inflate it with boxes outside the image; the counts are reported, never hidden. A
    submission scored exactly as submitted (``clip=False``) keeps its boxes as given: no
    corner swap, no clipping.
    """
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    if not (len(boxes) == len(scores) == len(labels)):
        raise ValueError(
            f"detections disagree in length: {len(boxes)} boxes, {len(scores)} scores, {len(labels)} labels"
        )
    finite = np.isfinite(boxes).all(axis=1) & np.isfinite(scores)
    non_finite = int((~finite).sum())
    boxes, scores, labels = boxes[finite], scores[finite], labels[finite]
    swapped = 0
    if clip:
        swapped = int(((boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1])).sum())
        low, high = np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])
        limits = np.array([width, height], dtype=np.float64)
        boxes = np.concatenate([np.clip(low, 0, limits), np.clip(high, 0, limits)], axis=1).reshape(-1, 4)
    keep = best_per_class(scores, labels, max_detections)
    truncated = int((~keep).sum())
    if truncated:
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
    return Sanitized(boxes, scores, labels, non_finite, truncated, swapped)
