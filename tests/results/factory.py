"""Results rows shaped as the pytest plugin writes them, generated for the results tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rf100vl_hf import catalog
from rf100vl_hf.specs import ModelSpec

DATASETS = {  # dataset -> domain (catalogue datasets, two domains, plus the generated sample)
    "bees": "Flora & Fauna",
    "fish-market-ggjso": "Flora & Fauna",
    "actions": "Sports",
    "sample": "custom",
}


def detection_row(spec: str, dataset: str, ap: float | None, run_id: str = "run-a",
                  timestamp: str = "2025-05-01T10:00:00+00:00", **extra: Any) -> dict[str, Any]:
    classes = [{"class": "x", "ap": ap, "ap50": None if ap is None else min(100.0, ap + 20), "n_instances": 7},
               {"class": "y | z", "ap": None, "ap50": None, "n_instances": 0}]
    return {
        "run_id": run_id, "timestamp": timestamp, "benchmark": "rf100vl", "model": ModelSpec.parse(spec).name,
        "spec": spec, "checkpoint": f"ckpt/{spec}", "model_revision": "abc123", "adapter_options": "{}",
        "dataset": dataset, "split": "test", "n_images": 10, "images_per_s": 5.0, "device": "cpu",
        "dtype": "float32", "batch_size": 2, "torch_version": "2.0", "smoke": False, "dropped": 0, "clipped": 1,
        "truncated": 0, "failed_images": 0, "first_error": None, "domain": DATASETS.get(dataset) or catalog.get(dataset).domain, "prompt": "names",
        "ap": ap, "ap50": None if ap is None else min(100.0, ap + 20), "ap75": ap, "n_predictions": 30,
        "dataset_fingerprint": f"fp-{dataset}", "min_ap": None, "threshold_source": None, "check": "unchecked",
        "predictions_file": f"predictions/{spec}/{dataset}/test.json", "per_class": classes,
        **extra,
    }


TIDE_KEYS = ("cls", "loc", "both", "dupe", "bkg", "miss", "fp", "fn")


def error_columns(base: float) -> dict[str, Any]:
    """A detection row's errors section: ΔAP50 of each type ``base``, ``base + 1``... (AP points)."""
    return {**{f"tide_{name}": base + i for i, name in enumerate(TIDE_KEYS)},
            **{f"tide_{name}_n": 3 + i for i, name in enumerate(TIDE_KEYS[:6])},
            "confused_pairs": [{"truth": "x", "predicted": "y | z", "count": 4}], "ece": 0.1, "mce": 0.3,
            "calibration_note": None, "label_error_files": ["a.jpg"],
            "confusion_file": None}


def catalogue_rows() -> list[dict[str, Any]]:
    """A whole matrix: two models on the 100 catalogue datasets (a few unscored, TIDE columns for
    one model, three runs, and a dataset scored again by a later run: its last row counts)."""
    rows = []
    for m, spec in enumerate(("owlv2", "predictions:/runs/oracle")):
        for i, entry in enumerate(catalog.entries()):
            ap = None if (i + m) % 37 == 5 else (i * 7.3 + m * 11.1) % 100
            rows.append(detection_row(spec, entry.basename, ap, run_id=f"run-{i % 3}",
                                      **(error_columns(i % 5) if m == 0 else {})))
    return rows + [detection_row("owlv2", "bees", 12.5, run_id="run-3", timestamp="2025-05-02T10:00:00+00:00",
                                 **error_columns(9))]


def uouo_row(spec: str, dataset: str, miou: float, accuracy: float, run_id: str = "run-a",
             timestamp: str = "2025-05-01T10:00:00+00:00") -> dict[str, Any]:
    return {
        "run_id": run_id, "timestamp": timestamp, "benchmark": "uouo", "model": spec, "spec": spec,
        "checkpoint": None, "model_revision": None, "adapter_options": "{}", "dataset": dataset, "split": "test",
        "n_images": 8, "images_per_s": 3.0, "device": "cpu", "dtype": "float32", "smoke": True, "dropped": 0,
        "clipped": 0, "truncated": 0, "failed_images": 0, "first_error": None, "accuracy": accuracy, "miou": miou,
        "acc50": 0.5, "box_parse_failures": 0, "quadrant_parse_failures": 1, "dataset_fingerprint": f"fp-{dataset}",
        "min_accuracy": None, "min_miou": None, "threshold_source": None, "check": "unchecked",
    }


def write_jsonl(folder: Path, rows: list[dict[str, Any]], torn: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + torn, encoding="utf-8")
    return folder
