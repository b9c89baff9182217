"""A model's bad output is repaired and counted, a model that raises costs only the image it
raised on, and an interrupted run keeps the pairs it finished."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugin.helpers import link, results


def test_bad_output_is_counted_reported_and_the_run_goes_on(
    fakes: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    link(data_dir, "sample", small_sample)
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "messy", "--rf100vl-dataset", "sample", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-batch-size", "3", "--rf100vl-device", "cpu", "--override-ini", "rf100vl_max_failed_fraction=0.2",
    )
    result.assert_outcomes(passed=1)  # one image of 8 failed: within the allowed fraction
    (row,) = results(fakes.path / ".rf100vl" / "results")
    # image 0: a NaN box, an infinite score and label 99 dropped; image 1: two boxes clipped;
    # image 2: 1200 boxes, the best 500 kept; image 4 raised (in a batch of three: the others
    # of its batch were retried alone and kept their detections).
    assert (row["dropped"], row["clipped"], row["truncated"], row["failed_images"]) == (3, 2, 700, 1)
    assert row["n_images"] == 8
    assert row["n_predictions"] == 1 + 2 + 500 + 3
    assert "image 4" in row["first_error"] and "RuntimeError: boom on image 4" in row["first_error"]
    result.stdout.fnmatch_lines(
        [
            "| messy | sample | * | 8 | 506 | 3 | 2 | 700 | 0 | 1 | unchecked |",
            "*messy on sample: 1 image(s) failed; RuntimeError: boom on image 4",
        ]
    )


def test_an_interrupted_run_keeps_the_pairs_it_finished(
    fakes: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    for name in ("first", "second"):
        link(data_dir, name, small_sample)
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "interrupt", "--rf100vl-dataset", "first,second", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", no_reraise_ctrlc=True,
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    folder = fakes.path / ".rf100vl" / "results"
    assert [row["dataset"] for row in results(folder)] == ["first"]
    assert (folder / "predictions" / "interrupt" / "first" / "test.json").is_file()
    assert "| first |" in (folder / "summary.md").read_text(encoding="utf-8")


def test_a_dataset_not_on_disk_is_skipped_and_the_summary_says_how_to_get_it(
    fakes: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    link(data_dir, "sample", small_sample)
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "nothing", "--rf100vl-dataset", "sample,bees", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", "-rs",
    )
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "## Datasets not on disk (skipped)",
            "bees",
            f"RF100-VL dataset 'bees' is not in {data_dir}*",
            "*download_rf100vl*",
            "SKIPPED * RF100-VL dataset 'bees' is not in *(how to get it: see the rf100vl summary)",
        ]
    )


def test_a_model_that_cannot_load_fails_each_of_its_pairs_with_the_reason(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    for name in ("sample", "second"):
        link(data_dir, name, small_sample)
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "owlv3", "--rf100vl-dataset", "sample,second", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu",
    )
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*model owlv3: UnknownNameError: unknown model adapter 'owlv3'; closest: owlv2*"] * 2
        + ["## Pairs that could not run", "- owlv3-sample: model owlv3: UnknownNameError*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_prompt_mode_the_model_lacks_fails_its_pairs_with_the_reason(
    fakes: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    link(data_dir, "sample", small_sample)
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "nothing", "--rf100vl-dataset", "sample", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", "--rf100vl-prompt", "instructions",
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*nothing-sample: ValueError: adapter 'nothing' does not support prompt mode 'instructions'*"]
    )


FULL_DISK = """
import errno, os
import pyarrow.parquet

_kept = pyarrow.parquet.write_table


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as Arrow raises it: no file named


def pytest_configure(config):
    pyarrow.parquet.write_table = _full


def pytest_unconfigure(config):
    pyarrow.parquet.write_table = _kept
"""


def test_a_full_disk_at_finish_is_one_line_naming_the_file_and_keeps_every_row(fakes: pytest.Pytester) -> None:
    """results.parquet cannot be written: the rows of results.jsonl stay, summary.md is still
    written, pytest's summary still prints, and the run exits 1."""
    (fakes.path / "conftest.py").write_text((fakes.path / "conftest.py").read_text() + FULL_DISK, encoding="utf-8")
    result = fakes.runpytest_inprocess("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample",
                                       "--rf100vl-device", "cpu", "--benchmark-disable")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    folder = fakes.path / ".rf100vl" / "results"
    result.stdout.fnmatch_lines([
        "*= rf100vl summary =*",
        f"rf100vl: error: {folder / 'results.parquet'}: No space left on device; every row is in "
        f"{folder / 'results.jsonl'} (exit status 1)",
        "*= 1 passed*",  # a clean venv adds pytest's "cannot be rewritten" warnings to the count
    ])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert [row["dataset"] for row in results(folder)] == ["sample"]
    assert sorted(path.name for path in folder.iterdir() if path.is_file()) == ["results.jsonl", "results.jsonl.lock",
                                                                                "summary.md"]
