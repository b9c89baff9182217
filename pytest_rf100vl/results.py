"""The results folder of a run.

- ``results.jsonl``: one line per pair, appended (and flushed to disk) as each pair
  finishes, so an interrupted run loses nothing it computed. The file accumulates across
  runs; ``run_id`` tells them apart. ``benchmark`` says which kind a row is: ``rf100vl``
  rows have ``ap`` (percent) and its kin, ``uouo`` rows ``accuracy``, ``miou`` and
  ``acc50`` (fractions, as UOUO's Table 1 reports them) and the parse failures.
- ``results.parquet``: this run's rows, written when the session ends (a column a row
  lacks is null there).
- ``summary.md``: this run's tables, laid out like RF100-VL's Table 2 and UOUO's Table 1.
- ``predictions/<model>/<dataset>/<split>.json``: each RF100-VL pair's predictions in COCO
  results format with the export's own image and category ids;
  ``--rf100vl-model predictions:<results>/predictions/<model>`` replays them.
- ``predictions/<model>/<uouo dataset>/test.jsonl``: each UOUO pair's answers, one line per
  mosaic (``mosaic_id``, ``target``, ``target_box``, ``target_quadrant``, the answered
  ``box`` and ``quadrant``, the model's ``raw`` text, ``iou``, ``correct``,
  ``parse_failure`` and the ``error`` when the adapter raised on it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pytest_rf100vl.grounding import GroundingEvaluation
from pytest_rf100vl.pair import Evaluation
from pytest_rf100vl.runner import OutputCounts, Timing
from pytest_rf100vl.selection import Pair
from pytest_rf100vl.thresholds import Threshold, check_status

JSONL = "results.jsonl"
PARQUET = "results.parquet"
SUMMARY = "summary.md"
PREDICTIONS = "predictions"
VERSIONED = ("torch", "transformers", "datasets", "rf100vl-hf")


def versions() -> dict[str, str | None]:
    """Installed versions of what a score depends on (read from metadata: nothing is imported)."""
    found: dict[str, str | None] = {}
    for package in VERSIONED:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def model_folder(spec: str, max_length: int = 64) -> str:
    """A folder name for a model spec: checkpoints may hold ``/`` and ``:``, and paths can be
    longer than a file name may be (a long one keeps its end and gets a hash of the whole)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_.") or "model"
    if len(slug) <= max_length:
        return slug
    digest = hashlib.sha1(spec.encode("utf-8")).hexdigest()[:10]
    return f"{slug[-(max_length - 11):].lstrip('_.')}-{digest}"


def _percent(value: float) -> float | None:
    return None if math.isnan(value) else 100 * value


def _common(
    pair: Pair,
    described: dict[str, Any],
    options: dict[str, Any],
    split: str,
    batch_size: int,
    timing: Timing,
    counts: OutputCounts,
    run_id: str,
) -> dict[str, Any]:
    """The columns of every row: what ran, on what, how fast, and what its output needed."""
    return {
        "run_id": run_id,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "benchmark": pair.kind,
        "model": described["model"],
        "spec": pair.model,
        "checkpoint": described["checkpoint"],
        "model_revision": described["revision"],
        "adapter_options": json.dumps(options, sort_keys=True, default=str),
        "dataset": pair.dataset,
        "split": split,
        "n_images": timing.n_images,
        "images_per_s": timing.images_per_s,
        **{key: timing.latency_ms().get(key) for key in
           ("latency_batch_p50_ms", "latency_batch_p95_ms", "latency_image_p50_ms", "latency_image_p95_ms")},
        "peak_gpu_memory_mb": timing.peak_gpu_memory_mb,
        "inference_s": timing.seconds,
        "device": described["device"],
        "dtype": described["dtype"],
        "batch_size": batch_size,
        **{f"{package.replace('-', '_')}_version": v for package, v in versions().items()},
        "smoke": bool(described["smoke"]),
        **counts.as_dict(),
    }


def detection_row(
    pair: Pair,
    described: dict[str, Any],
    options: dict[str, Any],
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    batch_size: int,
    evaluation: Evaluation,
    run_id: str,
    threshold: Threshold | None,
    predictions_file: Path,
) -> dict[str, Any]:
    """An RF100-VL pair's results row (AP in percent, as the paper reports it), with its threshold check."""
    scores, inference = evaluation.scores, evaluation.inference
    ap = _percent(scores.ap)
    return {
        **_common(pair, described, options, split, batch_size, inference.timing, inference.counts, run_id),
        "domain": metadata["domain"],
        "prompt": prompt,
        "ap": ap,
        **{name: _percent(getattr(scores, name)) for name in
           ("ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar500")},
        "n_predictions": scores.n_predictions,
        "dataset_fingerprint": metadata.get("fingerprint"),
        "min_ap": threshold.minimum if threshold else None,
        "threshold_source": threshold.source if threshold else None,
        "check": check_status([(ap, threshold)] if threshold else []),
        "predictions_file": str(predictions_file),
    }


def uouo_fingerprint(metadata: dict[str, Any]) -> str:
    """What fixes a UOUO dataset's mosaics: its metadata (source fingerprint, CLIP weights,
    seed, number of mosaics, sigma, format version, ...), hashed."""
    return hashlib.sha1(json.dumps(metadata, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def grounding_row(
    pair: Pair,
    described: dict[str, Any],
    options: dict[str, Any],
    metadata: dict[str, Any],
    batch_size: int,
    evaluation: GroundingEvaluation,
    run_id: str,
    thresholds: dict[str, Threshold],
    answers_file: Path,
) -> dict[str, Any]:
    """A UOUO pair's results row (rates are fractions, as UOUO's Table 1 reports them), with its
    threshold checks (``thresholds``: metric -> minimum)."""
    scores, inference = evaluation.scores, evaluation.inference
    values = {"accuracy": scores.quadrant_accuracy, "miou": scores.miou}
    sources = dict.fromkeys(threshold.source for threshold in thresholds.values())
    return {
        **_common(pair, described, options, "test", batch_size, inference.timing, inference.counts, run_id),
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
        **{f"min_{metric}": thresholds[metric].minimum if metric in thresholds else None for metric in values},
        "threshold_source": "; ".join(sources) or None,
        "check": check_status([(values[metric], threshold) for metric, threshold in thresholds.items()]),
        "predictions_file": str(answers_file),
    }


class ResultsWriter:
    """Writes a run's files into one folder; safe to use from the first pair to the last."""

    def __init__(self, folder: Path, run_id: str):
        self.folder = Path(folder)
        self.run_id = run_id

    @property
    def jsonl(self) -> Path:
        return self.folder / JSONL

    def predictions_dir(self, spec: str) -> Path:
        return self.folder / PREDICTIONS / model_folder(spec)

    def write_predictions(self, spec: str, dataset: str, split: str, predictions: list[dict[str, Any]]) -> Path:
        """An RF100-VL pair's predictions, as one COCO results JSON list."""
        path = self.predictions_dir(spec) / dataset / f"{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(predictions), encoding="utf-8")
        return path

    def write_answers(self, spec: str, dataset: str, records: list[dict[str, Any]]) -> Path:
        """A UOUO pair's answers, one JSON line per mosaic."""
        path = self.predictions_dir(spec) / dataset / "test.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(record, default=str) + "\n" for record in records), encoding="utf-8")
        return path

    def append(self, row: dict[str, Any]) -> None:
        """Add a row to ``results.jsonl`` and force it to disk before the next pair starts."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.jsonl.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, allow_nan=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def finish(self, rows: list[dict[str, Any]], summary: str) -> None:
        """Write this run's ``results.parquet`` and ``summary.md``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.folder.mkdir(parents=True, exist_ok=True)
        if rows:
            columns = dict.fromkeys(key for row in rows for key in row)  # RF100-VL and UOUO rows differ
            pq.write_table(pa.Table.from_pylist([{key: row.get(key) for key in columns} for row in rows]),
                           self.folder / PARQUET)
        (self.folder / SUMMARY).write_text(summary, encoding="utf-8")
