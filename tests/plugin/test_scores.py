"""Scores against a reference: the oracle scores 100 on real exports, replayed predictions score
what pycocotools itself computes, and the results folder holds every column and replays to
the same AP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.plugin.helpers import link, results
from tests.support.coco_reference import precision_ap, pycocotools_eval

ROW_COLUMNS = {
    "model", "spec", "checkpoint", "dataset", "domain", "split", "prompt", "ap", "ap50", "ap75", "n_images",
    "n_predictions", "images_per_s", "device", "dtype", "batch_size", "torch_version", "transformers_version",
    "datasets_version", "rf100vl_hf_version", "model_revision", "dataset_fingerprint", "timestamp", "smoke",
    "dropped", "clipped", "truncated", "failed_images", "first_error", "latency_batch_p50_ms",
    "latency_image_p95_ms", "peak_gpu_memory_mb", "check", "min_ap", "threshold_source", "predictions_file",
}


def pycocotools_ap(annotations_file: Path, predictions: list[dict[str, Any]]) -> float:
    """AP50:95 in percent the way the paper's code computes it: COCOeval at maxDets
    [1, 10, 500], read from the precision array (annotation ids renumbered from 1)."""
    ground_truth = json.loads(annotations_file.read_text(encoding="utf-8"))
    for number, annotation in enumerate(ground_truth["annotations"], start=1):
        annotation["id"] = number
    return 100 * precision_ap(pycocotools_eval(ground_truth, predictions))


def jittered(annotations_file: Path, seed: int = 0) -> list[dict[str, Any]]:
    """Ground-truth boxes moved and resized a little, with random scores, plus false positives."""
    rng = np.random.default_rng(seed)
    data = json.loads(annotations_file.read_text(encoding="utf-8"))
    sizes = {image["id"]: (image["width"], image["height"]) for image in data["images"]}
    classes = [c["id"] for c in data["categories"] if c["supercategory"] != "none"]
    records = []
    for ann in data["annotations"]:
        x, y, w, h = ann["bbox"]
        for _ in range(2):
            records.append({"image_id": ann["image_id"], "category_id": ann["category_id"],
                            "bbox": [x + rng.normal(0, 3), y + rng.normal(0, 3), w * rng.uniform(0.8, 1.2), h],
                            "score": float(rng.uniform())})
    for image_id in sizes:
        records.append({"image_id": image_id, "category_id": int(rng.choice(classes)),
                        "bbox": [10.0, 20.0, 30.0, 40.0], "score": float(rng.uniform())})
    for record in records:  # inside the image, so that nothing is clipped
        width, height = sizes[record["image_id"]]
        x, y, w, h = record["bbox"]
        x, y = min(max(x, 0.0), width), min(max(y, 0.0), height)
        record["bbox"] = [x, y, max(0.0, min(w, width - x)), max(0.0, min(h, height - y))]
    return records


def run_pairs(pytester: pytest.Pytester, model: str, datasets: str, data_dir: Path) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        "--rf100vl-model", model, "--rf100vl-dataset", datasets, f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", "--benchmark-disable",
    )


def test_the_oracle_scores_exactly_100_on_real_exports(
    pytester: pytest.Pytester, data_dir: Path, shared_data: Path
) -> None:
    for name in ("microcontroller", "chess-pieces"):
        link(data_dir, name, shared_data / name)
    run_pairs(pytester, "oracle", "microcontroller,chess-pieces", data_dir).assert_outcomes(passed=2)
    rows = results(pytester.path / ".rf100vl" / "results")
    assert [(row["dataset"], row["ap"], row["ap50"], row["n_images"]) for row in rows] == [
        ("microcontroller", 100.0, 100.0, 15), ("chess-pieces", 100.0, 100.0, 10)
    ]


def test_the_oracle_on_the_sample_scores_what_pycocotools_scores(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    """The sample has a zero-width and a zero-height ground-truth box, which pycocotools can
    never match (their IoU with anything is 0): the protocol caps the oracle below 100 there,
    and gives exactly 100 once they are removed."""
    annotations = small_sample / "test" / "_annotations.coco.json"
    data = json.loads(annotations.read_text(encoding="utf-8"))
    truth = [{**{k: ann[k] for k in ("image_id", "category_id", "bbox")}, "score": 1.0} for ann in data["annotations"]]
    link(data_dir, "sample", small_sample)
    cleaned = data_dir / "cleaned"
    (cleaned / "test").mkdir(parents=True)
    for image in (small_sample / "test").iterdir():
        if image.name != annotations.name:
            (cleaned / "test" / image.name).hardlink_to(image)
    data["annotations"] = [ann for ann in data["annotations"] if ann["bbox"][2] > 0 and ann["bbox"][3] > 0]
    (cleaned / "test" / annotations.name).write_text(json.dumps(data), encoding="utf-8")

    run_pairs(pytester, "oracle", "sample,cleaned", data_dir).assert_outcomes(passed=2)
    ap = {row["dataset"]: row["ap"] for row in results(pytester.path / ".rf100vl" / "results")}
    assert ap["cleaned"] == 100.0
    assert ap["sample"] == pytest.approx(pycocotools_ap(annotations, truth), abs=1e-9)
    assert ap["sample"] < 100.0


def test_replayed_predictions_score_as_pycocotools_and_results_replay_to_the_same_ap(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    annotations = small_sample / "test" / "_annotations.coco.json"
    predictions = jittered(annotations)
    submitted = pytester.path / "submitted.json"
    submitted.write_text(json.dumps(predictions), encoding="utf-8")
    link(data_dir, "sample", small_sample)

    run_pairs(pytester, f"predictions:{submitted}", "sample", data_dir).assert_outcomes(passed=1)
    folder = pytester.path / ".rf100vl" / "results"
    (row,) = results(folder)
    expected = pycocotools_ap(annotations, predictions)
    assert 5.0 < expected < 95.0  # the curve is exercised, not a degenerate case
    assert row["ap"] == pytest.approx(expected, abs=1e-9)
    assert row["n_predictions"] == len(predictions)
    assert row["images_per_s"] > 0  # timed by the plugin itself: pytest-benchmark is disabled here
    assert ROW_COLUMNS <= set(row)
    assert ROW_COLUMNS <= set(pq.read_table(folder / "results.parquet").column_names)

    written = Path(row["predictions_file"])
    assert written == folder / "predictions" / written.parent.parent.name / "sample" / "test.json"
    run_pairs(pytester, f"predictions:{written.parent.parent}", "sample", data_dir).assert_outcomes(passed=1)
    replayed = results(folder)[-1]
    assert replayed["ap"] == pytest.approx(row["ap"], abs=1e-9)
    assert replayed["run_id"] != row["run_id"]
