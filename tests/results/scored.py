"""Results folders whose rows point at real predictions files, over sample exports on disk, for
the tests of ``results compare`` and ``draw``: each row's AP is what pycocotools itself gives
its predictions, so anything recomputed from the files can be checked against it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf.metrics import evaluate

from tests.results.factory import detection_row, write_jsonl
from tests.support.coco_reference import precision_ap, pycocotools_eval

DATASETS = ("bees", "fish-market-ggjso", "sample")
"""Two datasets of one domain (sample exports under catalogue names) and one custom dataset."""
TEST_IMAGES = 16


@dataclass(frozen=True)
class Exported:
    """A dataset on disk: its test split's ground truth (COCO, the export's ids) and fingerprint."""

    truth: dict[str, Any]
    fingerprint: str


def write_exports(data_dir: Path, names: tuple[str, ...] = DATASETS) -> dict[str, Exported]:
    """A sample export per dataset of ``names`` (each drawn with its own seed), prepared."""
    from rf100vl_hf.metadata import read_metadata
    from rf100vl_hf.results.predictions import load_split
    from rf100vl_hf.sample import write_sample_export

    exported = {}
    for seed, name in enumerate(names):
        write_sample_export(data_dir / name, seed=seed, sizes={"test": TEST_IMAGES})
        split = load_split(name, "test", data_dir)
        exported[name] = Exported(split.ground_truth, read_metadata(split.dataset)["fingerprint"])
    return exported


def pycocotools_percent(truth: dict[str, Any], predictions: list[dict[str, Any]]) -> float:
    """AP50:95 in percent, from pycocotools itself."""
    return 100 * precision_ap(pycocotools_eval(truth, predictions))


def write_folder(folder: Path, spec: str, exported: dict[str, Exported],
                 predictions: dict[str, list[dict[str, Any]]], **extra: Any) -> dict[str, float]:
    """A results folder of ``spec`` with one row per dataset of ``predictions`` and its file;
    the AP (pycocotools') of each dataset."""
    rows, scores = [], {}
    for name, records in predictions.items():
        path = folder / "predictions" / spec / name / "test.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(records), encoding="utf-8")
        scores[name] = pycocotools_percent(exported[name].truth, records)
        errors = evaluate(exported[name].truth, records, explain=True).errors
        assert errors is not None
        columns = {"dataset_fingerprint": exported[name].fingerprint, "predictions_file": str(path),
                   "n_images": TEST_IMAGES, **{f"tide_{key}": 100 * value for key, value in errors.delta_ap.items()},
                   **extra}
        rows.append(detection_row(spec, name, scores[name], **columns))
    write_jsonl(folder, rows)
    return scores
