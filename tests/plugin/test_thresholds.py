"""Thresholds: the thresholds file (pairs, every pair, and means), and the comparison of
complete domains with the paper; each failure says what was measured, the minimum and its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from rf100vl_hf import catalog

from tests.plugin.helpers import link, results


@pytest.fixture
def two_datasets(data_dir: Path, small_sample: Path) -> list[str]:
    for name in ("sample", "second"):
        link(data_dir, name, small_sample)
    return [f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-dataset", "sample,second", "--rf100vl-device", "cpu"]


def test_a_minimum_for_every_pair_fails_a_pair_and_a_dataset_row_overrides_it(
    fakes: pytest.Pytester, two_datasets: list[str]
) -> None:
    fakes.path.joinpath("thresholds.csv").write_text("model,target,min_ap\n*,*,5\nnothing,second,0\n",
                                                     encoding="utf-8")
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "nothing", *two_datasets, "--override-ini", "rf100vl_thresholds=thresholds.csv"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*nothing on sample: AP50:95 0.00 is below the minimum 5.00 (from thresholds.csv line 2)"]
    )
    rows = {row["dataset"]: row for row in results(fakes.path / ".rf100vl" / "results")}
    assert (rows["sample"]["check"], rows["sample"]["min_ap"], rows["sample"]["threshold_source"]) == (
        "failed", 5.0, "thresholds.csv line 2"
    )
    assert (rows["second"]["check"], rows["second"]["threshold_source"]) == ("passed", "thresholds.csv line 3")
    assert "nothing on All" not in result.stdout.str() and "nothing on custom" not in result.stdout.str()  # * is no mean


def test_a_failed_domain_mean_fails_the_session_while_its_pairs_pass(
    fakes: pytest.Pytester, two_datasets: list[str]
) -> None:
    fakes.path.joinpath("thresholds.csv").write_text(
        "# minimums in percent\nmodel,target,min_ap\n*,second,0\n\nnothing,Custom,1\nnothing:other,All,0\n",
        encoding="utf-8",
    )
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "nothing", *two_datasets, "--override-ini", "rf100vl_thresholds=thresholds.csv"
    )
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "- FAILED: nothing on custom: mean AP50:95 0.00 over 2 dataset(s) is below the minimum 1.00 "
            "(from thresholds.csv line 5)",
            "*1 check(s) of means failed (exit status 1)",
        ]
    )
    assert "nothing on All" not in result.stdout.str()  # that rule is for another checkpoint
    summary = (fakes.path / ".rf100vl" / "results" / "summary.md").read_text(encoding="utf-8")
    assert "| nothing | sample |" in summary and "| unchecked |" in summary
    assert "passed (>= 0, thresholds.csv line 3)" in summary


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,target\nowlv2,bees\n", "*thresholds.csv: header: missing column(s) min_ap*"),
        ("model,target,min_ap\nowlv2,bees,high\n", "*thresholds.csv: line 2: min_ap: 'high' is not a number"),
        ("model,target,min_ap\n,bees,3\n", "*thresholds.csv: line 2: model: is empty"),
    ],
    ids=["header", "number", "empty"],
)
def test_a_bad_thresholds_file_is_a_usage_error(pytester: pytest.Pytester, text: str, message: str) -> None:
    pytester.path.joinpath("thresholds.csv").write_text(text, encoding="utf-8")
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "owlv2", "--rf100vl-dataset", "bees", "--override-ini", "rf100vl_thresholds=thresholds.csv", "--co"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_complete_domain_is_compared_with_the_paper(
    fakes: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    sports = [e.basename for e in catalog.select("Sports")]
    for name in [*sports, "aerial-airport"]:
        link(data_dir, name, small_sample)
    run = [
        "--rf100vl-model", "nothing", "--rf100vl-dataset", "domain:Sports", "--rf100vl-dataset", "aerial-airport",
        f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-device", "cpu", "--rf100vl-data-option", "reference=paper",
        "--rf100vl-data-option", "reference-method=nothing=GroundingDINO",
    ]
    result = fakes.runpytest_inprocess(*run)
    result.assert_outcomes(passed=7)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "- NOT CHECKED: nothing on Aerial: 1 of 11 datasets ran",
            "- FAILED: nothing on Sports: mean AP50:95 0.00 over 6 datasets; paper rf100vl_table2 row 'GroundingDINO' "
            "(RF100-VL paper: arXiv 2505.20612v1 (May 2025)), zero-shot: 13.0; difference -13.00 is beyond the "
            "tolerance 1",
        ]
    )
    result = fakes.runpytest_inprocess(*run, "--rf100vl-data-option", "tolerance=13")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["- PASSED: nothing on Sports: mean AP50:95 0.00 over 6 datasets;*is within the tolerance 13"]
    )


def test_a_model_without_a_paper_row_is_reported_not_checked(
    fakes: pytest.Pytester, two_datasets: list[str]
) -> None:
    result = fakes.runpytest_inprocess("--rf100vl-model", "nothing", *two_datasets, "--rf100vl-data-option", "reference=paper")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["- NOT CHECKED: nothing on All: no zero-shot paper row for this model*"])
