"""The rows and prediction files a plugin run writes are what ``results compare`` and ``draw``
read: two runs of the sample compare by what pycocotools gives, and a row draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rf100vl_hf.cli import main
from rf100vl_hf.results.compare import compare

from tests.plugin.helpers import link, results
from tests.plugin.test_scores import jittered, pycocotools_ap


def test_two_runs_compare_by_what_pycocotools_gives_and_their_rows_draw(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link(data_dir, "sample", small_sample)
    annotations = small_sample / "test" / "_annotations.coco.json"
    predictions = jittered(annotations)
    submitted = tmp_path / "submitted.json"
    submitted.write_text(json.dumps(predictions), encoding="utf-8")
    for model, folder in ((f"predictions:{submitted}", "a"), ("oracle", "b")):
        pytester.runpytest_inprocess(
            "--rf100vl-model", model, "--rf100vl-dataset", "sample", f"--rf100vl-data-option=data-dir={data_dir}",
            "--rf100vl-device", "cpu", "--benchmark-disable", f"--rf100vl-results={folder}",
        ).assert_outcomes(passed=1)
    truth = json.loads(annotations.read_text(encoding="utf-8"))
    oracle = [{**{k: ann[k] for k in ("image_id", "category_id", "bbox")}, "score": 1.0} for ann in truth["annotations"]]

    result = compare(pytester.path / "a", pytester.path / "b", data_dir=data_dir, resamples=200, progress=False)
    (difference,) = result.datasets
    assert difference.difference == pytest.approx(pycocotools_ap(annotations, oracle)
                                                  - pycocotools_ap(annotations, predictions), abs=1e-9)
    assert difference.low <= difference.difference <= difference.high and difference.images == 8

    (row,) = results(pytester.path / "a")
    assert main(["draw", str(pytester.path / "a"), "--dataset", "sample", "--out", str(tmp_path / "drawn"),
                 "--option", "images=2", "--option", f"data-dir={data_dir}"]) == 0
    assert capsys.readouterr().out.count("wrote ") == 2 and row["dataset"] == "sample"
