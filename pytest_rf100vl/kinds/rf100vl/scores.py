"""An RF100-VL pair's score: its detections as COCO results with the export's own image and
category ids (what the predictions file holds, and what a replay scores again), scored with
COCO AP50:95 at maxDets=500 (:func:`rf100vl_hf.metrics.evaluate`), in percent as the paper
reports AP, and the errors behind it (:mod:`rf100vl_hf.metrics.errors`, ``docs/errors.md``):
TIDE, the confusion matrix (a CSV beside the predictions), calibration, label-error candidates."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rf100vl_hf.arrow import arrow_columns
from rf100vl_hf.boxes import Sanitized, xyxy_to_xywh
from rf100vl_hf.metrics import CocoScores, coco_ground_truth, evaluate
from rf100vl_hf.metrics.errors import TIDE_ORACLES, TIDE_TYPES
from rf100vl_hf.metrics.inputs import ARRAY_COLUMNS
from rf100vl_hf.protocols import PAPER, PROTOCOLS
from rf100vl_hf.results.schema import DetectionErrors, DetectionScores

from pytest_rf100vl.engine.runner import Answers
from pytest_rf100vl.kinds.base import Scored, Split

SCORING_BACKEND = "hotcoco"
"""The backend ``rf100vl_hf.metrics.evaluate`` scores with by default, as the plugin calls it
(its precision arrays equal pycocotools'; the version is in ``hotcoco_version``)."""
CONFUSION_SUFFIX = ".confusion.csv"


def percent(value: float) -> float | None:
    return None if math.isnan(value) else 100 * value


def coco_array(detections: dict[int, Sanitized], category_ids: list[int]) -> np.ndarray:
    """The detections as one ``(N, 7)`` array of COCO results (:data:`rf100vl_hf.metrics.ARRAY_COLUMNS`)
    with the export's own image and category ids: what the metric reads fastest, with no dict
    per detection."""
    parts = [np.column_stack([np.full(len(safe.scores), image_id, dtype=np.float64), xyxy_to_xywh(safe.boxes),
                              safe.scores, np.asarray(category_ids, dtype=np.float64)[safe.labels]])
             for image_id, safe in detections.items() if len(safe.scores)]
    return np.concatenate(parts) if parts else np.zeros((0, len(ARRAY_COLUMNS)))


def coco_predictions(rows: np.ndarray) -> list[dict[str, Any]]:
    """COCO result records of :func:`coco_array`'s rows, so a file of them can be scored (or
    replayed) against the original export."""
    return [{"image_id": int(image), "category_id": int(category), "bbox": [x, y, w, h], "score": score}
            for image, x, y, w, h, score, category in rows.tolist()]


def detection_scores(answers: Answers, split: Split) -> Scored:
    """AP and its kin of the pair's detections, at the protocol's maxDets (``split.task``: what
    the model was told, whose category ids its labels index); unscored when the split has no
    ground-truth box. A category 0 the protocol prompted has no box in the ground truth, as
    pycocotools scores Roboflow's scripts' own files."""
    assert split.task is not None  # the pair's stages set it
    metadata = split.metadata
    rows = coco_array(answers.detections, list(split.task.category_ids))
    truth = coco_ground_truth(split.images, list(metadata["category_ids"]))
    for cid, name in zip(split.task.category_ids, split.task.classes):
        if cid not in metadata["category_ids"]:
            unique = f"{name} (category {cid})" if name in metadata["classes"] else name
            truth["categories"].insert(0, {"id": cid, "name": unique})
    max_dets = getattr(split, "protocol", PROTOCOLS[PAPER]).max_dets
    scores = evaluate(truth, rows, max_dets=max_dets, explain=True)
    ap = percent(scores.ap)
    columns = DetectionScores(
        scoring_backend=SCORING_BACKEND, ap=ap,
        **{name: percent(getattr(scores, name)) for name in ("ap50", "ap75", "ap_small", "ap_medium", "ap_large")},
        **{scores.ar_column: percent(scores.ar)}, max_dets=scores.max_dets,
        n_predictions=scores.n_predictions, n_instances=sum(n for n in scores.per_class_instances.values() if n),
        per_class=scores.class_rows(),
    )
    unscored = None if ap is not None else (
        f"AP50:95 is undefined: the {split.name} split of {split.metadata['name']} has no ground-truth box "
        "(is it annotated?)")
    errors, files = error_columns(scores, split)
    return Scored({"ap": ap}, columns, coco_predictions(rows), "json", unscored, scores, errors, files)


def error_columns(scores: CocoScores, split: Split) -> tuple[DetectionErrors, dict[str, tuple[str, str]]]:
    """The row's errors section of a scored split (ΔAP in AP points) and its confusion matrix's
    CSV; label-error candidates named by their images' files, best-scored first, once each."""
    errors = scores.errors
    assert errors is not None  # scored with explain=True
    names: dict[int, str] = {}
    if split.name_column and errors.label_errors:
        table = arrow_columns(split.images, [split.id_column, split.name_column])
        names = dict(zip(table.column(split.id_column).to_pylist(), table.column(split.name_column).to_pylist()))
    files = [str(names.get(scores.image_ids[c.image_id], scores.image_ids[c.image_id])) for c in errors.label_errors]
    columns = DetectionErrors(
        **{f"tide_{name}": percent(errors.delta_ap[name]) for name in (*TIDE_TYPES, *TIDE_ORACLES)},
        **{f"tide_{name}_n": errors.counts[name] for name in TIDE_TYPES},
        confused_pairs=errors.confused_pairs(), ece=errors.ece, mce=errors.mce,
        calibration_note=errors.calibration_note, label_error_files=list(dict.fromkeys(files)),
    )
    return columns, {"confusion_file": (CONFUSION_SUFFIX, errors.confusion_csv())}
