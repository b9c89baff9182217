"""Pass and fail mean something: a model that fails on its images fails its pair (beyond
``--rf100vl-max-failed-fraction``), a pair that cannot be scored errors, and an adapter that
breaks as a whole (``set_task`` raising, ``sys.exit``) costs its own pair only, listed in
the summary. The hostile adapters are in ``hostile_adapters.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugin.helpers import link, results

HOSTILE_ADAPTERS = Path(__file__).with_name("hostile_adapters.py")


@pytest.fixture
def hostile(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder whose conftest registers the adapters of ``hostile_adapters.py``."""
    pytester.makeconftest(HOSTILE_ADAPTERS.read_text(encoding="utf-8"))
    return pytester


def _run(pytester: pytest.Pytester, data_dir: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-device", "cpu", "-p", "no:cacheprovider", *args
    )


def _could_not_run(pytester: pytest.Pytester) -> list[str]:
    """The lines of summary.md under "Pairs that could not run"."""
    text = (pytester.path / ".rf100vl" / "results" / "summary.md").read_text(encoding="utf-8")
    section = text.partition("## Pairs that could not run\n\n")[2].partition("\n\n")[0]
    return [line for line in section.splitlines() if line]


def test_a_model_that_raises_on_every_image_fails_its_pair_with_the_count_and_first_error(
    hostile: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    link(data_dir, "sample", small_sample)
    result = _run(hostile, data_dir, "--rf100vl-model", "raiser", "--rf100vl-dataset", "sample")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "raiser on sample: the model failed on 8 of 8 images (100.0%), more than max-failed-fraction 0 "
        "allows; first error: image 0 (*): RuntimeError: broken on image 0 (full traceback in results.jsonl)",
    ])
    (row,) = results(hostile.path / ".rf100vl" / "results")
    assert (row["failed_images"], row["n_images"], row["ap"]) == (8, 8, 0.0)  # scored: AP 0, and failed


@pytest.mark.parametrize(
    ("allowed", "outcome"),
    [(None, "failed"), ("0.1", "failed"), ("0.125", "passed"), ("ini 0.2", "passed")],
    ids=["default 0", "below 1 of 8", "exactly 1 of 8", "ini key"],
)
def test_failed_images_up_to_the_allowed_fraction_pass(
    hostile: pytest.Pytester, data_dir: Path, small_sample: Path, allowed: str | None, outcome: str
) -> None:
    link(data_dir, "sample", small_sample)
    args = ["--rf100vl-model", "raiser", "--rf100vl-dataset", "sample", "--rf100vl-adapter-option", "first_good=1"]
    if allowed and allowed.startswith("ini "):
        hostile.makeini(f"[pytest]\nrf100vl_max_failed_fraction = {allowed.split()[1]}\n")
    elif allowed:
        args += ["--override-ini", f"rf100vl_max_failed_fraction={allowed}"]
    result = _run(hostile, data_dir, *args)
    result.assert_outcomes(**{outcome: 1})
    (row,) = results(hostile.path / ".rf100vl" / "results")
    assert row["failed_images"] == 1  # only image 0 raised
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*the model failed on 1 of 8 images (12.5%)*RuntimeError: broken on image 0*"])


def test_a_fraction_outside_0_1_is_a_usage_error(hostile: pytest.Pytester) -> None:
    result = hostile.runpytest_inprocess("--rf100vl-model", "nothing", "--override-ini", "rf100vl_max_failed_fraction=1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*rf100vl_max_failed_fraction: expected a fraction in [[]0, 1[]], got 1.5*"])


def test_set_task_raising_costs_that_pair_only_and_the_summary_lists_it(
    hostile: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    for name in ("sample", "second"):
        link(data_dir, name, small_sample)
    result = _run(hostile, data_dir, "--rf100vl-model", "badtask", "--rf100vl-model", "nothing",
                  "--rf100vl-dataset", "sample,second")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines([
        "_* ERROR at setup of test_detection[[]badtask-sample[]] _*",
        "the adapter's set_task raised RuntimeError: cannot take this task",
    ])
    assert _could_not_run(hostile) == [
        f"- badtask-{name}: the adapter's set_task raised RuntimeError: cannot take this task"
        for name in ("sample", "second")
    ]
    assert [(row["spec"], row["dataset"]) for row in results(hostile.path / ".rf100vl" / "results")] == [
        ("nothing", "sample"), ("nothing", "second")
    ]


@pytest.mark.parametrize("where", ["load", "set_task", "predict"])
def test_sys_exit_in_an_adapter_costs_that_pair_only(
    hostile: pytest.Pytester, data_dir: Path, small_sample: Path, where: str
) -> None:
    link(data_dir, "sample", small_sample)
    result = _run(hostile, data_dir, "--rf100vl-model", "exiter", "--rf100vl-model", "nothing",
                  "--rf100vl-dataset", "sample", "--rf100vl-adapter-option", f"exiter.where={where}")
    result.assert_outcomes(passed=1, errors=1)  # the next model's pair runs normally
    assert "AssertionError" not in result.stdout.str()
    (line,) = _could_not_run(hostile)
    assert line.startswith("- exiter-sample: ") and line.endswith("called sys.exit(3)")
    (row,) = results(hostile.path / ".rf100vl" / "results")
    assert row["spec"] == "nothing"


def test_a_test_split_without_annotations_errors_instead_of_passing(
    hostile: pytest.Pytester, data_dir: Path, small_sample: Path, tmp_path: Path
) -> None:
    import shutil

    export = tmp_path / "unannotated"
    shutil.copytree(small_sample, export)
    coco = export / "test" / "_annotations.coco.json"
    data = json.loads(coco.read_text(encoding="utf-8"))
    coco.write_text(json.dumps({**data, "annotations": []}), encoding="utf-8")
    link(data_dir, "unannotated", export)
    result = _run(hostile, data_dir, "--rf100vl-model", "nothing", "--rf100vl-dataset", "unannotated",
                  "-W", "ignore::UserWarning")
    result.assert_outcomes(errors=1)
    expected = ("could not be scored: AP50:95 is undefined: the test split of unannotated has no ground-truth box "
                "(is it annotated?)")
    result.stdout.fnmatch_lines(["_* ERROR at setup of test_detection[[]nothing-unannotated[]] _*", expected])
    assert _could_not_run(hostile) == [f"- nothing-unannotated: {expected}"]


def test_uouo_pairs_that_answer_nothing_or_exit_error_and_the_others_run(
    hostile: pytest.Pytester, uouo: list[str]
) -> None:
    result = hostile.runpytest_inprocess(
        "--rf100vl-model", "raiser", "--rf100vl-model", "exiter", "--rf100vl-model", "nothing",
        "--rf100vl-dataset", "uouo-random", "--rf100vl-adapter-option", "exiter.where=ground", *uouo,
    )
    result.assert_outcomes(passed=1, errors=2)
    assert _could_not_run(hostile) == [
        "- raiser-uouo-random: could not be scored: the model failed on every one of the 8 mosaics; first error: "
        "image 0 (mosaic_000000.png): RuntimeError: no answer",
        "- exiter-uouo-random: the adapter called sys.exit(3)",
    ]
