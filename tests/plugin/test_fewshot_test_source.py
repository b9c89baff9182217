"""``--rf100vl-data-option=test-source=fewshot`` and ``--rf100vl-fewshot-class-match``: pairs scored on the
few-shot export's own test split (RF100-VL issue #31) say so in ``split_parameters``, so they
never merge with the full test split's rows, and reading a row back finds its images again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rf100vl_hf.results.rows import latest

from tests.plugin.helpers import results
from tests.rf100vl.test_fewshot_test_split import NAME, fsod_export


def test_pairs_on_the_fewshot_test_split_are_rows_of_their_own(
    pytester: pytest.Pytester, sample_root: Path, tmp_path: Path
) -> None:
    from rf100vl_hf.results.predictions import row_split

    full, fsod = fsod_export(sample_root, tmp_path, {"circle": "Circle"})
    where = [f"--rf100vl-data-option=data-dir={full.parent}", f"--rf100vl-data-option=fewshot-dir={fsod.parent}"]
    run = ["--rf100vl-model", "oracle", "--rf100vl-dataset", NAME, *where, "--rf100vl-device", "cpu",
           "--benchmark-disable"]
    refused = pytester.runpytest_inprocess(*run, "--rf100vl-data-option=test-source=fewshot")
    refused.assert_outcomes(errors=1)
    refused.stdout.fnmatch_lines(["*'Circle' (id 1), where the full export's category 1 is 'circle'*"])
    pytester.runpytest_inprocess(*run, "--rf100vl-data-option=test-source=fewshot", "--rf100vl-data-option=fewshot-class-match=id",
                                 "-W", "ignore::UserWarning").assert_outcomes(passed=1)
    pytester.runpytest_inprocess(*run, "--rf100vl-data-option=fewshot-class-match=id", "-W", "ignore::UserWarning"
                                 ).assert_outcomes(passed=1)
    rows = results(pytester.path / ".rf100vl" / "results")
    fewshot_test, full_test = rows
    made = json.loads(fewshot_test["split_parameters"])
    assert (made["test_source"], made["class_match"], made["renamed"]) == ("fewshot", "id", {"Circle": "circle"})
    assert full_test["split_parameters"] == "{}" and full_test["reused_from"] is None
    assert fewshot_test["n_images"] == 4 != full_test["n_images"]
    assert len(latest(rows)) == 2
    split = row_split(fewshot_test, full.parent, fsod.parent)
    assert split.dataset["image_id"] == [image["id"] for image in json.loads(
        (fsod / "test" / "_annotations.coco.json").read_text(encoding="utf-8"))["images"]]
