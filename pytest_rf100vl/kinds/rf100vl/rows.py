"""An RF100-VL pair's results row: the common columns plus AP and its kin in percent, as the
paper reports AP (``ar500``, or ``ar100`` at maxDets 100, with ``max_dets``), with the pair's
threshold check."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rf100vl.engine.columns import common_columns
from pytest_rf100vl.core.metrics import Threshold, check_status

SCORING_BACKEND = "faster-coco-eval"
"""The backend ``rf100vl_hf.metrics.evaluate`` scores with by default, as the plugin calls it
(its precision arrays equal pycocotools' to 1e-9; the version is in ``faster_coco_eval_version``)."""

if TYPE_CHECKING:
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.kinds.rf100vl.evaluate import Evaluation


def percent(value: float) -> float | None:
    return None if math.isnan(value) else 100 * value


def split_parameters(metadata: dict[str, Any], split: str, prompt: str) -> str:
    """What made the split, as JSON: a few-shot split's source, K, seed, strategy and candidates
    (and, for an official split whose classes were matched by category id, ``class_match`` and
    the names mapped), the semi-supervised split's fraction and seed, a test split taken from the
    few-shot export (``test_source``, its export's fingerprint); and under ``examples`` what made
    the few-shot split a ``fewshot`` prompt shows the model. Part of a row's identity: another K,
    seed or strategy, or another test split, is another measurement, whether the model is scored
    on the split or prompted with it."""
    parameters: dict[str, Any] = {}
    fewshot, semisup = metadata.get("fewshot") or {}, metadata.get("semisup") or {}
    test = metadata.get("test") or {}
    renamed = {"class_match": "id", "renamed": fewshot["renamed"]} if fewshot.get("renamed") else {}
    made_fewshot = {"fewshot_source": fewshot.get("source"),
                    **{key: fewshot.get(key) for key in ("k", "seed", "strategy", "candidates")}, **renamed}
    if split == fewshot.get("split"):
        parameters = dict(made_fewshot)
    elif split == semisup.get("split"):
        parameters = {"fraction": semisup.get("fraction"), "seed": semisup.get("seed")}
    elif split == "test" and test.get("source") == "fewshot":
        parameters = {"test_source": "fewshot", "test_fingerprint": test.get("fingerprint"), **renamed}
    if "fewshot" in prompt:  # the test by which tasks.detection_task gives the model the few-shot split
        parameters["examples"] = made_fewshot
    return json.dumps(parameters, sort_keys=True)


def detection_row(
    pair: "Pair",
    described: dict[str, Any],
    options: dict[str, Any],
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    batch_size: int,
    evaluation: "Evaluation",
    run_id: str,
    threshold: Threshold | None,
    predictions_file: Path,
) -> dict[str, Any]:
    """The row of an RF100-VL pair (AP in percent), with its threshold check."""
    scores, inference = evaluation.scores, evaluation.inference
    ap = percent(scores.ap)
    return {
        **common_columns(pair, described, options, split, batch_size, inference.timing, inference.counts, run_id,
                         inference.rounds),
        "domain": metadata["domain"],
        "prompt": prompt,
        "scoring_backend": SCORING_BACKEND,
        "ap": ap,
        **{name: percent(getattr(scores, name)) for name in ("ap50", "ap75", "ap_small", "ap_medium", "ap_large")},
        scores.ar_column: percent(scores.ar),
        "max_dets": scores.max_dets,
        "n_predictions": scores.n_predictions,
        "n_instances": sum(n for n in scores.per_class_instances.values() if n),
        "per_class": scores.class_rows(),
        "split_parameters": split_parameters(metadata, split, prompt),
        "dataset_fingerprint": metadata.get("fingerprint"),
        "min_ap": threshold.minimum if threshold else None,
        "threshold_source": threshold.source if threshold else None,
        "check": check_status([(ap, threshold)] if threshold else []),
        "predictions_file": str(predictions_file),
    }
