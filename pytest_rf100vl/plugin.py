"""pytest plugin: benchmark each (model, dataset) pair of RF100-VL and UOUO as one test.

``pytest --rf100vl-model owlv2:tiny --rf100vl-dataset sample`` runs the pair
``rf100vl::test_detection[owlv2:tiny-sample]``: the model is loaded once for all its
datasets, the pair is run and scored by its benchmark kind, checked against its threshold,
and recorded in ``.rf100vl/results``. This module only wires pytest's hooks to the layers
that do the work (``docs/architecture.md``), top down: ``collect/`` (the configuration read
from pytest, the matrix node), ``session/`` (the matrix, each pair's stages, thresholds, the
summary, publishing), ``kinds/`` (one package per benchmark), ``engine/`` (the inference
loop, the answer cache), ``adapters/`` (one module per model family) and ``core/`` (the
shared types).

Without matrix options the plugin adds nothing to a run and imports nothing heavy (torch,
transformers and datasets load only when a pair runs). With them and no test paths, only
the matrix runs; with test paths, both run. Datasets that are not on disk are skipped, and
the summary says how to get them.
"""

from __future__ import annotations

from typing import Any

import pytest

from rf100vl_hf.errors import os_error_line
from rf100vl_hf.redact import public_value, scrub
from rf100vl_hf.results.schema import ResultRow

from pytest_rf100vl import hookspec
from pytest_rf100vl.collect import collection
from pytest_rf100vl.collect.collection import matrix_session
from pytest_rf100vl.collect.config_reader import add_options, check_moved_flags, check_rootdir, read_config
from pytest_rf100vl.core.checks import FAILED
from pytest_rf100vl.core.config import all_options
from pytest_rf100vl.core.options import Option
from pytest_rf100vl.core.stash import CONFIG_KEY, KINDS_KEY, SESSION_KEY
from pytest_rf100vl.fixtures import (  # noqa: F401  (fixtures are found in the plugin's namespace)
    rf100vl_adapter,
    rf100vl_config,
    rf100vl_dataset,
    rf100vl_pair,
    rf100vl_run,
)
from pytest_rf100vl.kinds import kind_classes, option_sections

SUMMARY_KEY = pytest.StashKey[str]()
MEAN_FAILURES_KEY = pytest.StashKey[int]()
EMPTY_KEY = pytest.StashKey[str]()
"""Why no pair ran, when none did (the run then exits 5 unless the report key ``allow-empty``)."""
LOST_KEY = pytest.StashKey[str]()
"""The results file that could not be written (a full disk), as one line."""
NOTES_KEY = pytest.StashKey[list[tuple[bool, str]]]()
"""Lines for the terminal summary after the results: (is a warning, text)."""


def _options() -> tuple[Option, ...]:
    return all_options(option_sections())


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser, _options())


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    check_moved_flags(args, _options())  # before pytest's own refusal of an unknown flag, which cannot say more


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_configure(config: pytest.Config) -> None:
    check_rootdir(config, _options())
    run = read_config(config)
    config.stash[CONFIG_KEY] = run
    config.stash[KINDS_KEY] = [kind(run.kind(kind.name)) for kind in kind_classes()]
    if run.active:  # the session layer loads only for a matrix run: every pytest session loads this module
        from pytest_rf100vl.session import trackers, workers
        from pytest_rf100vl.session.live import PLUGIN_NAME, LiveProgress

        matrix_session(config)  # a bad name or thresholds file is a usage error now, not per test
        workers.configure(config)  # pytest-xdist: pairs balanced by cost, one device per worker
        trackers.configure(config, run)  # the report keys wandb, mlflow
        config.pluginmanager.register(LiveProgress(config), PLUGIN_NAME)  # progress and logs of long steps


def _active(config: pytest.Config) -> bool:
    return CONFIG_KEY in config.stash and config.stash[CONFIG_KEY].active


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    if isinstance(collector, pytest.Session) and _active(collector.config) and report.passed:
        module = collection.matrix_module(collector)
        if collection.user_named_paths(collector.config):
            report.result.append(module)
        else:
            report.result = [module]
    return report


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rf100vl_pair" not in metafunc.fixturenames or not _active(metafunc.config):
        return
    session = matrix_session(metafunc.config)
    test_names = {name: kind.test_name for name, kind in session.kinds.items()}
    pairs = collection.matrix_pairs(metafunc, session.pairs, test_names)
    metafunc.parametrize("rf100vl_pair", pairs, ids=[pair.id for pair in pairs], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _active(config):
        collection.model_major(items, config.stash[CONFIG_KEY].matrix.models)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not _active(config):
        return None
    run = config.stash[CONFIG_KEY]
    session = matrix_session(config)
    datasets = list(dict.fromkeys(pair.dataset for pair in session.pairs))
    shown = ", ".join(datasets[:8]) + (f", ... ({len(datasets)} in all)" if len(datasets) > 8 else "")
    loop = run.loop
    lines = [
        f"rf100vl: {len(session.pairs)} pair(s); models: {', '.join(map(str, run.matrix.models))}; datasets: {shown}",
        f"rf100vl: device {loop.device}, dtype {loop.dtype}, batch size {loop.batch_size}, attention "
        f"{loop.attention or 'auto'}{', compiled' if loop.compile else ''}; results in {run.report.results}",
    ]
    if run.training.split is not None:
        seeds = sorted({pair.seed for pair in session.pairs if pair.seed is not None})
        lines.append(f"rf100vl: fine-tuned on {run.training.split} first (seeds {', '.join(map(str, seeds))})")
    for name in {pair.kind for pair in session.pairs}:
        given = [arg.lstrip("-") for arg in run.kind_args(name)]
        lines.append(f"{name}: {', '.join(given) or 'default options'}")

    if run.matrix.adapter_options:
        lines.append("rf100vl: adapter options: " + ", ".join(
            f"{o.adapter + '.' if o.adapter else ''}{o.key}={public_value(o.value)}" for o in run.matrix.adapter_options
        ))
    return [scrub(line) for line in lines]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test's report, as pytest and its reporters will show it: scrubbed of every secret."""
    report = yield
    if _active(item.config):
        from pytest_rf100vl.session.scrubbing import scrub_report

        scrub_report(report)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Release the model, run the kinds' checks of means, write results.parquet and summary.md,
    then call ``pytest_rf100vl_results_written``."""
    config = session.config
    if SESSION_KEY not in config.stash or config.option.collectonly:
        return
    from pytest_rf100vl.session import listeners, resume, workers
    from pytest_rf100vl.session.report import summary

    state = config.stash[SESSION_KEY]
    state.release()
    if workers.is_worker(config):  # the xdist controller writes the results and prints the summary
        workers.send_to_controller(config, state)
        return
    rows = state.rows
    unfinished = resume.unfinished(workers.planned_pairs(session), state, rows)
    reports = state.reports(rows)
    checks = [check for report in reports.values() for check in report.checks]

    text = summary(rows, reports, state.missing, state.errors, state.left_out)
    text = scrub(text + resume.interruption(unfinished, session.exitstatus == pytest.ExitCode.INTERRUPTED))
    lost = _write_results(state.writer, rows, text)
    if lost and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    config.stash[SUMMARY_KEY] = text
    notes = [(True, warning) for warning in listeners.results_written(config, state.writer.folder, rows)]
    config.stash[NOTES_KEY] = [(warning, scrub(line)) for warning, line in notes]
    if lost:
        config.stash[LOST_KEY] = scrub(lost)
    failed = sum(check.status == FAILED for check in checks)
    config.stash[MEAN_FAILURES_KEY] = failed
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if not rows and session.exitstatus == pytest.ExitCode.OK and not state.config.report.allow_empty:
        config.stash[EMPTY_KEY] = _why_empty(state)
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


def _write_results(writer: Any, rows: list[ResultRow], text: str) -> str | None:
    """Write results.parquet and summary.md; what could not be written (a full disk) as one
    line naming the file, else ``None``: the rows are in results.jsonl whatever happens here."""
    try:
        writer.finish(rows, text)
    except OSError as exc:
        return f"{os_error_line(exc)}; every row is in {writer.jsonl} (exit status 1)"
    return None


def _why_empty(state: Any) -> str:
    """One line on why a matrix run ran no pair: what was missing or left out."""
    reasons = []
    if state.missing:
        reasons.append(f"{len(state.missing)} dataset(s) not on disk ({', '.join(sorted(state.missing))})")
    if state.left_out:
        reasons.append(f"{len(state.left_out)} pair(s) left out (the model does not answer their benchmark)")
    if not state.pairs:
        reasons.append("the selection has no pair")
    return "no pair ran: " + ("; ".join(reasons) or "every pair was skipped or deselected")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if SUMMARY_KEY not in config.stash:
        return
    terminalreporter.write_sep("=", "rf100vl summary")
    terminalreporter.write_line(config.stash[SUMMARY_KEY])
    terminalreporter.write_line(f"results: {config.stash[SESSION_KEY].writer.folder}")
    for warning, line in config.stash[NOTES_KEY]:
        terminalreporter.write_line(f"rf100vl: {'warning: ' if warning else ''}{line}", yellow=warning)
    if LOST_KEY in config.stash:
        terminalreporter.write_line(f"rf100vl: error: {config.stash[LOST_KEY]}", red=True, bold=True)
    if EMPTY_KEY in config.stash:
        terminalreporter.write_line(
            f"rf100vl: {config.stash[EMPTY_KEY]}: exit status 5 (-o rf100vl_allow_empty=true accepts an empty run)",
            red=True, bold=True,
        )
    failed = config.stash[MEAN_FAILURES_KEY]
    if failed:
        terminalreporter.write_line(f"rf100vl: {failed} check(s) of means failed (exit status 1)", red=True, bold=True)
