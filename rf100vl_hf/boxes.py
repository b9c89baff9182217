"""Box conventions in one place: COCO ``[x, y, w, h]`` in pixels for data and evaluation,
``xyxy`` only as an intermediate that adapters produce and that is converted here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_DETECTIONS = 500
"""RF100-VL evaluates at maxDets=500, so keeping more per image can never change a score."""


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

    boxes: np.ndarray  # (N, 4) xyxy, float64, inside the image
    scores: np.ndarray  # (N,)
    labels: np.ndarray  # (N,) int64
    non_finite: int  # dropped: NaN or infinite box or score
    truncated: int  # dropped: beyond the best ``max_detections``


def sanitize_detections(
    boxes_xyxy: np.ndarray,
    scores: np.ndarray,
    labels: np.ndarray,
    width: int,
    height: int,
    max_detections: int = MAX_DETECTIONS,
) -> Sanitized:
    """Drop non-finite detections, clip boxes to the image, keep the best ``max_detections``.

    Every model's output goes through here, so a model cannot crash the metric with NaN or
    inflate it with boxes outside the image; the counts are reported, never hidden.
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
    boxes = np.stack(
        [
            np.clip(np.minimum(boxes[:, 0], boxes[:, 2]), 0, width),
            np.clip(np.minimum(boxes[:, 1], boxes[:, 3]), 0, height),
            np.clip(np.maximum(boxes[:, 0], boxes[:, 2]), 0, width),
            np.clip(np.maximum(boxes[:, 1], boxes[:, 3]), 0, height),
        ],
        axis=1,
    ).reshape(-1, 4)
    truncated = max(0, len(scores) - max_detections)
    if truncated:
        keep = np.argsort(-scores, kind="stable")[:max_detections]
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
    return Sanitized(boxes, scores, labels, non_finite, truncated)
