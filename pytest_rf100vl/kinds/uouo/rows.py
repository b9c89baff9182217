"""A UOUO pair's results row: the common columns plus quadrant accuracy, mIoU and acc50
(fractions, as UOUO's Table 1 reports them), the parse failures and what fixed the mosaics."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rf100vl.engine.columns import common_columns
from pytest_rf100vl.core.metrics import Threshold, check_status

if TYPE_CHECKING:
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.kinds.uouo.evaluate import GroundingEvaluation


def uouo_fingerprint(metadata: dict[str, Any]) -> str:
    """What fixes a UOUO dataset's mosaics: its metadata (source fingerprint, CLIP weights,
    seed, number of mosaics, sigma, format version, ...), hashed."""
    return hashlib.sha1(json.dumps(metadata, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def grounding_row(
    pair: "Pair",
    described: dict[str, Any],
    options: dict[str, Any],
    metadata: dict[str, Any],
    batch_size: int,
    evaluation: "GroundingEvaluation",
    run_id: str,
    thresholds: dict[str, Threshold],
    answers_file: Path,
) -> dict[str, Any]:
    """The row of a UOUO pair, with its threshold checks (``thresholds``: metric -> minimum)."""
    scores, inference = evaluation.scores, evaluation.inference
    values = {"accuracy": scores.quadrant_accuracy, "miou": scores.miou}
    sources = dict.fromkeys(threshold.source for threshold in thresholds.values())
    return {
        **common_columns(pair, described, options, "test", batch_size, inference.timing, inference.counts, run_id,
                         inference.rounds),
        "accuracy": values["accuracy"],
        "miou": values["miou"],
        "acc50": scores.acc50,
        "parse_failures": scores.parse_failures,
        "box_parse_failures": scores.box_parse_failures,
        "quadrant_parse_failures": scores.quadrant_parse_failures,
        "uouo_config": metadata["config"],
        "uouo_source": metadata["source"]["name"],
        "uouo_source_fingerprint": metadata["source"]["fingerprint"],
        "num_mosaics": metadata["num_mosaics"],
        "seed": metadata["seed"],
        "clip_model": metadata["clip"]["model"],
        "clip_weights": metadata["clip"]["weights"],
        "dataset_fingerprint": uouo_fingerprint(metadata),
        "split_parameters": "{}",
        # mosaics whose hard neighbours came from CLIP with random weights make a smoke run too
        "smoke": bool(described["smoke"]) or metadata["clip"]["pretrained"] is None,
        **{f"min_{metric}": thresholds[metric].minimum if metric in thresholds else None for metric in values},
        "threshold_source": "; ".join(sources) or None,
        "check": check_status([(values[metric], threshold) for metric, threshold in thresholds.items()]),
        "predictions_file": str(answers_file),
    }
