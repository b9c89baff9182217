"""The results folder of a run.

- ``results.jsonl``: one line per pair, appended (and flushed to disk) as each pair
  finishes, so an interrupted run loses nothing it computed. The file accumulates across
  runs; ``run_id`` tells them apart.
- ``results.parquet``: this run's rows, written when the session ends.
- ``summary.md``: this run's table, laid out like the paper's Table 2.
- ``predictions/<model>/<dataset>/<split>.json``: each pair's predictions in COCO results
  format with the export's own image and category ids;
  ``--rf100vl-model predictions:<results>/predictions/<model>`` replays them.
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

from pytest_rf100vl.pair import Evaluation
from pytest_rf100vl.selection import Pair
from pytest_rf100vl.thresholds import Threshold

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


def result_row(
    pair: Pair,
    described: dict[str, Any],
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    batch_size: int,
    evaluation: Evaluation,
    run_id: str,
    threshold: Threshold | None,
    predictions_file: Path,
) -> dict[str, Any]:
    """One pair's results row (AP in percent, as the paper reports it), with its threshold check."""
    scores, inference = evaluation.scores, evaluation.inference
    ap = _percent(scores.ap)
    latency = inference.latency_ms()
    return {
        "run_id": run_id,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": described["model"],
        "spec": pair.model,
        "checkpoint": described["checkpoint"],
        "model_revision": described["revision"],
        "dataset": pair.dataset,
        "domain": metadata["domain"],
        "split": split,
        "prompt": prompt,
        "ap": ap,
        **{name: _percent(getattr(scores, name)) for name in
           ("ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar500")},
        "n_images": inference.n_images,
        "n_predictions": scores.n_predictions,
        "images_per_s": inference.images_per_s,
        **{key: latency.get(key) for key in
           ("latency_batch_p50_ms", "latency_batch_p95_ms", "latency_image_p50_ms", "latency_image_p95_ms")},
        "peak_gpu_memory_mb": inference.peak_gpu_memory_mb,
        "inference_s": inference.seconds,
        "device": described["device"],
        "dtype": described["dtype"],
        "batch_size": batch_size,
        **{f"{package.replace('-', '_')}_version": v for package, v in versions().items()},
        "dataset_fingerprint": metadata.get("fingerprint"),
        "smoke": bool(described["smoke"]),
        **inference.counts.as_dict(),
        "min_ap": threshold.minimum if threshold else None,
        "threshold_source": threshold.source if threshold else None,
        "check": check_status(ap, threshold),
        "predictions_file": str(predictions_file),
    }


def check_status(ap: float | None, threshold: Threshold | None) -> str:
    """``unchecked`` without a threshold; ``failed`` when AP is below it or undefined."""
    if threshold is None:
        return "unchecked"
    return "passed" if ap is not None and ap >= threshold.minimum else "failed"


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
        path = self.predictions_dir(spec) / dataset / f"{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(predictions), encoding="utf-8")
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
            pq.write_table(pa.Table.from_pylist(rows), self.folder / PARQUET)
        (self.folder / SUMMARY).write_text(summary, encoding="utf-8")
