"""The run's configuration, typed and parsed at the edge: a ``--rf100vl-config`` file runs the
same matrix as the command line, the command line wins over it, a bad key or value is a usage
error naming the file and the key, ``load_config`` reads the same file from Python and
``RunConfig.to_args`` gives it back as a command line, and the plugin sets every split
parameter that ``rf100vl-hf prepare`` takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rf100vl import load_config
from pytest_rf100vl.core.stash import CONFIG_KEY

from tests.plugin.helpers import link, results

RUN = """
matrix:
  model: [oracle]
  dataset: [sample]
loop: {device: cpu, batch-size: 2}
report: {results: from-file}
rf100vl: {data-dir: data}
minimums: {ap: 50}
"""


@pytest.fixture
def run_file(pytester: pytest.Pytester, small_sample: Path) -> Path:
    (pytester.path / "data").mkdir()
    link(pytester.path / "data", "sample", small_sample)
    path = pytester.path / "run.yaml"
    path.write_text(RUN, encoding="utf-8")
    return path


def test_a_config_file_runs_the_matrix_and_the_command_line_wins_over_it(
    pytester: pytest.Pytester, run_file: Path
) -> None:
    pytester.runpytest_inprocess(f"--rf100vl-config={run_file}", "--benchmark-disable").assert_outcomes(passed=1)
    (row,) = results(pytester.path / "from-file")  # relative paths are the file's folder's
    assert (row["spec"], row["dataset"], row["batch_size"], row["min_ap"]) == ("oracle", "sample", 2, 50)
    assert row["threshold_source"] == "run.yaml minimums.ap"  # the minimum is credited to the file, not the option
    assert "passed (>= 50, run.yaml minimums.ap)" in (pytester.path / "from-file" / "summary.md").read_text("utf-8")

    pytester.runpytest_inprocess(f"--rf100vl-config={run_file}", "--rf100vl-batch-size=3",
                                 f"--rf100vl-results={pytester.path / 'from-cli'}", "--benchmark-disable",
                                 "--rf100vl-rerun").assert_outcomes(passed=1)
    (row,) = results(pytester.path / "from-cli")
    assert (row["batch_size"], row["min_ap"]) == (3, 50)
    pytester.makeini("[pytest]\nrf100vl_min_ap = 40\n")
    pytester.runpytest_inprocess(f"--rf100vl-config={run_file}", f"--rf100vl-results={pytester.path / 'options'}",
                                 "--rf100vl-min-ap=30", "--benchmark-disable").assert_outcomes(passed=1)
    (row,) = results(pytester.path / "options")
    assert (row["min_ap"], row["threshold_source"]) == (30, "--rf100vl-min-ap")


@pytest.mark.parametrize(("text", "message"), [
    ("matrix: {modle: [oracle]}", "*run.yaml: unknown key matrix.modle (keys: model, dataset*"),
    ("looop: {device: cpu}", "*run.yaml: unknown section 'looop' (sections: matrix, loop, training, report*"),
    ("loop: {batch-size: 0}", "*--rf100vl-batch-size: must be at least 1 (or auto), got 0*"),
    ("minimums: {miou: 3}", "*--uouo-min-miou: expected a fraction in [[]0, 1[]]*got 3*"),
    ("[1, 2]", "*run.yaml: expected a mapping of sections, got list*"),
    ("matrix: {model: [oracle]", "*run.yaml: cannot read it:*"),
    ("rf100vl: {fewshot-candidates: 5}", "*rf100vl options: fewshot_candidates=5 needs fewshot_strategy='best'*"),
])
def test_a_bad_config_file_is_a_usage_error_naming_the_key(pytester: pytest.Pytester, text: str,
                                                            message: str) -> None:
    path = pytester.path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    result = pytester.runpytest_inprocess(f"--rf100vl-config={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_load_config_reads_the_file_and_to_args_gives_the_same_configuration(
    pytester: pytest.Pytester, run_file: Path
) -> None:
    loaded = load_config(run_file)
    assert [spec.text for spec in loaded.matrix.models] == ["oracle"] and loaded.loop.batch_size == 2
    assert loaded.report.results == run_file.parent / "from-file"
    assert {metric.name: value for metric, value in loaded.minimums.items()} == {"ap": 50}

    parsed = pytester.parseconfigure(*loaded.to_args())
    assert parsed.stash[CONFIG_KEY] == loaded


def test_the_plugin_sets_the_split_parameters_prepare_takes(pytester: pytest.Pytester) -> None:
    """A few-shot prompt shows the model a generated few-shot split of K=3 instances per class
    drawn by the best strategy: the row says so, as the build prepared by the command line would."""
    pytester.runpytest_inprocess(
        "--rf100vl-model=oracle", "--rf100vl-dataset=sample",
        "--rf100vl-prompt=fewshot", "--rf100vl-fewshot-k=3", "--rf100vl-fewshot-strategy=best",
        "--rf100vl-fewshot-candidates=4", "--rf100vl-device=cpu", "--benchmark-disable",
    ).assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    examples = json.loads(row["split_parameters"])["examples"]
    assert (examples["k"], examples["strategy"], examples["candidates"]) == (3, "best", 4)
