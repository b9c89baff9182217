"""Every detection row explains its AP: on a replayed predictions file holding every TIDE error
type, the row's ΔAP and counts, its confusion matrix file and its ECE are what hotcoco's own
functions give on the same files (pycocotools' matching and AP50: ``docs/errors.md``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.plugin.helpers import link, results
from tests.plugin.test_scores import run_pairs

TYPES = ("cls", "loc", "both", "dupe", "bkg", "miss")
HOTCOCO = {"cls": "Cls", "loc": "Loc", "both": "Both", "dupe": "Dupe", "bkg": "Bkg", "miss": "Miss", "fp": "FP",
           "fn": "FN"}


def every_error(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """Predictions on the sample's test split with one error of each type at least, beside
    true positives of several scores (so that calibration has bins to fill)."""
    boxes = {ann["id"]: (ann["image_id"], ann["category_id"], ann["bbox"]) for ann in truth["annotations"]}

    def on(ann_id: int, score: float, category: int | None = None, dx: float = 0.0) -> dict[str, Any]:
        image, cls, (x, y, w, h) = boxes[ann_id]
        return {"image_id": image, "category_id": category or cls, "bbox": [x + dx, y, w, h], "score": score}

    return [
        on(0, 0.9), on(1, 0.4), on(7, 0.8), on(8, 0.3), on(9, 0.75),  # found
        on(2, 0.95), on(2, 0.6, dx=4.0),  # found, then a duplicate
        on(3, 0.9, category=1),  # the right box, the wrong class
        on(6, 0.7, dx=35.75),  # the right class, IoU about 0.38
        on(10, 0.5, category=1, dx=37.0),  # the wrong class, IoU about 0.3
        {"image_id": 6, "category_id": 2, "bbox": [10.0, 10.0, 20.0, 20.0], "score": 0.99},  # on background
    ]  # boxes 11-15 are never found: missed


def hotcoco_on_files(annotations: Path, predictions: Path, folder: Path) -> Any:
    """hotcoco's COCOeval of the files, at the protocol's maxDets, as pycocotools would be given
    them: annotation ids from 1, without the export's category 0 (it names the dataset), and
    without its ``info`` (hotcoco refuses Roboflow's string ``year``)."""
    import hotcoco

    data = json.loads(annotations.read_text(encoding="utf-8"))
    del data["info"]
    data["categories"] = [c for c in data["categories"] if c["supercategory"] != "none"]
    for number, annotation in enumerate(data["annotations"], start=1):
        annotation["id"] = number
    truth_file = folder / "truth.json"
    truth_file.write_text(json.dumps(data), encoding="utf-8")
    truth = hotcoco.COCO(str(truth_file))
    evaluator = hotcoco.COCOeval(truth, truth.load_res(str(predictions)), "bbox")
    evaluator.params.max_dets = [1, 10, 500]
    evaluator.evaluate()
    evaluator.accumulate()
    return evaluator


def test_a_replayed_row_explains_its_ap_as_hotcoco_does(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    annotations = small_sample / "test" / "_annotations.coco.json"
    truth = json.loads(annotations.read_text(encoding="utf-8"))
    submitted = pytester.path / "submitted.json"
    submitted.write_text(json.dumps(every_error(truth)), encoding="utf-8")
    link(data_dir, "sample", small_sample)

    run_pairs(pytester, f"predictions:{submitted}", "sample", data_dir).assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    reference = hotcoco_on_files(annotations, submitted, pytester.path)
    tide = reference.tide_errors(pos_thr=0.5, bg_thr=0.1)

    assert all(row[f"tide_{name}_n"] >= 1 for name in TYPES), {name: row[f"tide_{name}_n"] for name in TYPES}
    assert {name: row[f"tide_{name}_n"] for name in TYPES} == {name: tide["counts"][HOTCOCO[name]] for name in TYPES}
    for name in (*TYPES, "fp", "fn"):
        assert row[f"tide_{name}"] == pytest.approx(100 * tide["delta_ap"][HOTCOCO[name]], abs=1e-9), name
    assert row["ap50"] == pytest.approx(100 * tide["ap_base"], abs=1e-9)  # the base the ΔAPs add to

    with Path(row["confusion_file"]).open(encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    expected = reference.confusion_matrix(iou_thr=0.5, max_det=500)
    assert table[0] == ["truth \\ predicted", "circle", "square", "triangle", "background"]
    assert [line[0] for line in table[1:]] == ["circle", "square", "triangle", "background"]
    np.testing.assert_array_equal(np.array([line[1:] for line in table[1:]], dtype=np.int64), expected["matrix"])
    assert row["confused_pairs"][0] == {"truth": "triangle", "predicted": "circle", "count": 1}

    calibration = reference.calibration(n_bins=10, iou_threshold=0.5)
    assert (row["ece"], row["mce"]) == (pytest.approx(calibration["ece"]), pytest.approx(calibration["mce"]))
    assert row["calibration_note"] is None
    files = {image["id"]: image["file_name"] for image in truth["images"]}
    assert row["label_error_files"][:2] == [files[6], files[2]]  # the background box, then the wrong class
