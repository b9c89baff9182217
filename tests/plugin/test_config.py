"""The run's configuration, typed and parsed at the edge: a ``--rf100vl-config`` file runs the
same matrix as the command line, the command line wins over it, a bad key or value is a usage
error naming the file and the key, ``load_config`` reads the same file from Python and
``RunConfig.to_args`` gives it back as a command line, and the plugin sets every split
parameter that ``rf100vl-hf prepare`` takes."""

from __future__ import annotations

import fnmatch
import json
import os
import threading
import time
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
report: {results: from-file, thresholds: every-pair.csv}
rf100vl: {data-dir: data}
"""


@pytest.fixture
def run_file(pytester: pytest.Pytester, small_sample: Path) -> Path:
    (pytester.path / "data").mkdir()
    link(pytester.path / "data", "sample", small_sample)
    (pytester.path / "every-pair.csv").write_text("model,target,min_ap\n*,*,50\n", encoding="utf-8")
    path = pytester.path / "run.yaml"
    path.write_text(RUN, encoding="utf-8")
    return path


def test_a_config_file_runs_the_matrix_and_the_command_line_wins_over_it(
    pytester: pytest.Pytester, run_file: Path
) -> None:
    pytester.runpytest_inprocess(f"--rf100vl-config={run_file}", "--benchmark-disable").assert_outcomes(passed=1)
    (row,) = results(pytester.path / "from-file")  # relative paths are the file's folder's
    assert (row["spec"], row["dataset"], row["batch_size"], row["min_ap"]) == ("oracle", "sample", 2, 50)
    assert row["threshold_source"] == "every-pair.csv line 2"  # the thresholds file the config file names
    assert "passed (>= 50, every-pair.csv line 2)" in (pytester.path / "from-file" / "summary.md").read_text("utf-8")

    pytester.runpytest_inprocess(f"--rf100vl-config={run_file}", "--rf100vl-batch-size=3",
                                 f"--rf100vl-results={pytester.path / 'from-cli'}", "--benchmark-disable",
                                 "--rf100vl-rerun").assert_outcomes(passed=1)
    (row,) = results(pytester.path / "from-cli")
    assert (row["batch_size"], row["min_ap"]) == (3, 50)
    (pytester.path / "sample-only.csv").write_text("model,target,min_ap\n*,*,40\noracle,sample,30\n", "utf-8")
    pytester.makeini("[pytest]\nrf100vl_thresholds = every-pair.csv\n")
    pytester.runpytest_inprocess(f"--rf100vl-config={run_file}", f"--rf100vl-results={pytester.path / 'options'}",
                                 "--override-ini=rf100vl_thresholds=sample-only.csv",
                                 "--benchmark-disable").assert_outcomes(passed=1)
    (row,) = results(pytester.path / "options")  # the command line's ini override wins; the dataset's row over *
    assert (row["min_ap"], row["threshold_source"]) == (30, "sample-only.csv line 3")


@pytest.mark.parametrize(("text", "message"), [
    ("matrix: {modle: [oracle]}", "*run.yaml: unknown key matrix.modle (keys: model, dataset*"),
    ("looop: {device: cpu}", "*run.yaml: unknown section 'looop' (sections: matrix, loop, training, report*"),
    ("loop: {batch-size: 0}", "*--rf100vl-batch-size: must be at least 1 (or auto), got 0*"),
    ("report: {max-failed-fraction: 3}", "*run.yaml: report.max-failed-fraction: rf100vl_max_failed_fraction: "
                                         "expected a fraction in [[]0, 1[]]*got 3*"),
    ("minimums: {ap: 3}", "*run.yaml: unknown section 'minimums'*thresholds file*"),
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
    assert loaded.report.thresholds == run_file.parent / "every-pair.csv"

    parsed = pytester.parseconfigure(*loaded.to_args())
    assert parsed.stash[CONFIG_KEY] == loaded


def test_the_plugin_sets_the_split_parameters_prepare_takes(pytester: pytest.Pytester) -> None:
    """A few-shot prompt shows the model a generated few-shot split of K=3 instances per class
    drawn by the best strategy: the row says so, as the build prepared by the command line would."""
    pytester.runpytest_inprocess(
        "--rf100vl-model=oracle", "--rf100vl-dataset=sample",
        "--rf100vl-prompt=fewshot", "--rf100vl-data-option=fewshot-k=3", "--rf100vl-data-option=fewshot-strategy=best",
        "--rf100vl-data-option=fewshot-candidates=4", "--rf100vl-device=cpu", "--benchmark-disable",
    ).assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    examples = json.loads(row["split_parameters"])["examples"]
    assert (examples["k"], examples["strategy"], examples["candidates"]) == (3, "best", 4)


def test_each_split_parameter_is_declared_once_for_the_plugin_and_prepare() -> None:
    """The plugin's key of each split parameter shows :class:`SplitParameters`' help and default,
    as ``rf100vl-hf prepare --option`` does, and refuses a bad value in prepare's words."""
    from dataclasses import fields

    from rf100vl_hf.cli import split_settings
    from rf100vl_hf.rf100vl.request import SplitParameters

    from pytest_rf100vl.core.options import options_of
    from pytest_rf100vl.kinds.rf100vl.options import DetectionOptions

    plugin = {declared.name: declared for declared in options_of(DetectionOptions)}
    command = {setting.key: setting for setting in split_settings()}
    for item in fields(SplitParameters):
        key = item.name.replace("_", "-")
        assert plugin[key].help == f"{item.metadata['help']} (default: {item.default})"
        assert command[key].help == f"{item.metadata['help']} (default {item.default})"
        assert plugin[key].default == item.default
    for key, bad, words in [("fewshot-k", "0", "fewshot_k must be an integer of at least 1, not 0"),
                            ("fewshot-strategy", "worst", "fewshot_strategy must be 'random' or 'best', not 'worst'"),
                            ("semisup-fraction", "2", "semisup_fraction must be a number in (0, 1], not 2.0")]:
        with pytest.raises(pytest.UsageError) as refused:
            plugin[key].parse(bad)
        assert str(refused.value) == f"--rf100vl-data-option {key}: {words}"


ALIAS_BOMB = "matrix:\n  dataset: " + "".join(
    f"\n    - &l{level} [{', '.join([f'*l{level - 1}' if level else 'x'] * 9)}]" for level in range(9)) + "\n"
"""Nine levels of nine aliases: 506 bytes, 387 million items expanded."""


def refused(path: Path) -> str:
    """The one-line usage error ``load_config(path)`` gives, read within seconds."""
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load_config(path)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 (the outcome is asserted below)
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    started = time.monotonic()
    reader.start()
    reader.join(timeout=20)
    assert outcome, f"load_config({path}) still reading after {time.monotonic() - started:.0f} s"
    (caught,) = outcome
    assert isinstance(caught, pytest.UsageError), caught
    message = str(caught)
    assert "\n" not in message and len(message) < 500, message
    return message


@pytest.mark.parametrize(("text", "expected"), [
    (ALIAS_BOMB, "holds more than 10000 values once its aliases are expanded"),
    ("matrix: {model: [oracle], dataset: 5, limit: true}", "--rf100vl-limit: expected a number, got True"),
    ("matrix: {model: true}", "--rf100vl-model: expected text or a list of text, got True"),
    ("matrix: {shard: " + "9" * 100_000 + "x}", "--rf100vl-shard: expected I/N with 1 <= I <= N, e.g. 1/4, got '999*"),
    ("matrix: {model: [oracle], adapter-option: [" + "o" * 100_000 + "]}", "expected [NAME.]KEY=VALUE, got 'ooo*"),
    ("matrix: {model: [oracle], dataset: {sample: 1}}", "--rf100vl-dataset: expected a list, got a mapping"),
    ("matrix: {model: [oracle, [a, b]]}", "--rf100vl-model: expected text items, got ['a', 'b']"),
    ("report: {results: [a, b]}", "--rf100vl-results: expected text, got ['a', 'b']"),
    ("loop: {batch-size: 2, batch_size: 4}", "loop.batch_size is given twice (as batch-size and batch_size)"),
    ("matrix: {limit: 2, limit: 3}", "duplicate key 'limit' (line 1)"),
    ("loop: {device: cpu}\nloop: {dtype: float16}", "duplicate key 'loop' (line 2)"),
    ("matrix: {limit: 1:30}", "--rf100vl-limit: expected a number, got '1:30'"),
    ("report: {results: run.yaml}", "--rf100vl-results: * is a file, not a folder"),
    ("report: {results: /dev/null}", "--rf100vl-results: /dev/null is a file, not a folder"),
    ("rf100vl: {data-dir: ''}", "--rf100vl-data-option data-dir: empty"),
    ("loop: {attention: ' '}", "rf100vl_attention: empty"),
    ("loop: {warmup-batches: .nan}", "rf100vl_warmup_batches: expected a number, got nan"),
    ("rf100vl: {tolerance: -1}", "--rf100vl-data-option tolerance: must be at least 0, got -1.0"),
])
def test_a_hostile_config_file_is_one_line_naming_the_file_and_key(tmp_path: Path, text: str,
                                                                   expected: str) -> None:
    """No hang, no traceback, no silent wrong value, no message the size of the value."""
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    message = refused(path)
    assert message.startswith(f"--rf100vl-config {path}: ") and fnmatch.fnmatch(message, "*{}*".format(expected.replace("[", "[[]"))), message


def test_a_config_path_that_is_no_regular_file_or_too_large_is_refused_without_reading_it(tmp_path: Path) -> None:
    assert "not a regular file" in refused(Path("/dev/zero"))
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in refused(fifo)
    huge = tmp_path / "huge.yaml"
    huge.write_text("#" * (2 << 20), encoding="utf-8")
    assert "is larger than 1,048,576 bytes" in refused(huge)


def test_relative_paths_of_a_config_file_are_the_files_folders(tmp_path: Path) -> None:
    """``loop.cache`` as ``report.results`` (docs/cli.md); ``off`` stays the word."""
    path = tmp_path / "conf" / "run.yaml"
    path.parent.mkdir()
    path.write_text("loop: {cache: answers}\nreport: {results: out}\n", encoding="utf-8")
    loaded = load_config(path)
    assert (loaded.loop.cache, loaded.report.results) == (path.parent / "answers", path.parent / "out")
    path.write_text("loop: {cache: 'off'}\n", encoding="utf-8")
    assert load_config(path).loop.cache == "off"


@pytest.mark.parametrize(("option", "expected"), [
    ("--rf100vl-results=", "--rf100vl-results: empty"),
    ("--rf100vl-results=/dev/null", "--rf100vl-results: /dev/null is a file, not a folder"),
    ("--rf100vl-data-option=data-dir=", "--rf100vl-data-option data-dir: empty"),
    ("--rf100vl-model=", "--rf100vl-model: empty"),
    ("--override-ini=rf100vl_wandb=", "rf100vl_wandb: empty"),
    ("--override-ini=rf100vl_max_failed_fraction=nan", "rf100vl_max_failed_fraction: expected a finite number, got nan"),
    ("--uouo-option=seed=inf", "--uouo-option seed: expected a number, got 'inf'"),
    ("--rf100vl-data-option=tolerance=nan", "--rf100vl-data-option tolerance: expected a finite number, got nan"),
    ("--rf100vl-data-option=tolerance=-1", "--rf100vl-data-option tolerance: must be at least 0, got -1.0"),
])
def test_an_empty_text_or_a_number_that_is_no_bound_is_a_usage_error(pytester: pytest.Pytester, option: str,
                                                                     expected: str) -> None:
    """Refused before any pair runs (an unset shell variable gives the empty text)."""
    result = pytester.runpytest_inprocess("--rf100vl-model=oracle", "--rf100vl-dataset=sample", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{expected}*"])
    assert not (pytester.path / ".rf100vl").exists()
