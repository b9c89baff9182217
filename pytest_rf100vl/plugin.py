"""pytest plugin: benchmark each (model, dataset) pair of RF100-VL and UOUO as one test.

``pytest --rf100vl-model owlv2:tiny --rf100vl-dataset sample`` runs the pair
``rf100vl::test_detection[owlv2:tiny-sample]``: the model is loaded once for all its
datasets, runs over the split under pytest-benchmark's clock, is scored with COCO AP at
maxDets=500, checked against its threshold, and recorded in ``.rf100vl/results``. The
datasets ``uouo-random`` and ``uouo-mmd`` run the same way as
``rf100vl::test_grounding[owlv2:tiny-uouo-mmd]``, scored with quadrant accuracy and mIoU.

Without ``--rf100vl-*`` matrix options the plugin adds nothing to a run and imports nothing
heavy (torch, transformers and datasets load only when a pair runs). With them and no test
paths, only the matrix runs; with test paths, both run. Datasets that are not on disk are
skipped, and the summary says how to get them.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rf100vl import collect, hookspec
from pytest_rf100vl.fixtures import (  # noqa: F401  (fixtures are found in the plugin's namespace)
    SESSION_KEY,
    SETTINGS_KEY,
    matrix_session,
    rf100vl_adapter,
    rf100vl_dataset,
    rf100vl_pair,
    rf100vl_run,
    rf100vl_settings,
)
from pytest_rf100vl.options import add_options, read_settings
from pytest_rf100vl.selection import UOUO

SUMMARY_KEY = pytest.StashKey[str]()
MEAN_FAILURES_KEY = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_configure(config: pytest.Config) -> None:
    settings = read_settings(config)
    config.stash[SETTINGS_KEY] = settings
    if settings.active:
        matrix_session(config)  # a bad name or thresholds file is a usage error now, not per test


def _active(config: pytest.Config) -> bool:
    return SETTINGS_KEY in config.stash and config.stash[SETTINGS_KEY].active


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    if isinstance(collector, pytest.Session) and _active(collector.config) and report.passed:
        module = collect.matrix_module(collector)
        if collect.user_named_paths(collector.config):
            report.result.append(module)
        else:
            report.result = [module]
    return report


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rf100vl_pair" not in metafunc.fixturenames or not _active(metafunc.config):
        return
    pairs = collect.matrix_pairs(metafunc, matrix_session(metafunc.config).pairs)
    metafunc.parametrize("rf100vl_pair", pairs, ids=[pair.id for pair in pairs], indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _active(config):
        collect.model_major(items, config.stash[SETTINGS_KEY].models)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if not _active(config):
        return None
    settings = config.stash[SETTINGS_KEY]
    session = matrix_session(config)
    datasets = list(dict.fromkeys(pair.dataset for pair in session.pairs))
    shown = ", ".join(datasets[:8]) + (f", ... ({len(datasets)} in all)" if len(datasets) > 8 else "")
    lines = [
        f"rf100vl: {len(session.pairs)} pair(s); models: {', '.join(settings.models)}; datasets: {shown}",
        f"rf100vl: split {settings.split}, prompt {settings.prompt}, device {settings.device}, "
        f"dtype {settings.dtype}, batch size {settings.batch_size}; results in {settings.results}",
    ]
    if any(pair.kind == UOUO for pair in session.pairs):
        given = ", ".join(f"{key} {'none (random weights)' if value is None else value}"
                          for key, value in settings.uouo_parameters().items())
        lines.append(f"uouo: split test; {given or 'default source, mosaics and CLIP model'}")
    if settings.adapter_options:
        lines.append("rf100vl: adapter options: " + ", ".join(
            f"{o.adapter + '.' if o.adapter else ''}{o.key}={o.value}" for o in settings.adapter_options
        ))
    return lines


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Release the model, check the means, write results.parquet and summary.md."""
    config = session.config
    if SESSION_KEY not in config.stash or config.option.collectonly:
        return
    from pytest_rf100vl.checks import FAILED, reference_checks, threshold_checks
    from pytest_rf100vl.table import summary

    state = config.stash[SESSION_KEY]
    state.release()
    rows = state.rows
    checks = threshold_checks(state.rules, rows)
    if state.settings.reference:
        checks += reference_checks(state.settings, rows)
    text = summary(rows, checks, state.missing, state.errors, state.left_out)
    state.writer.finish(rows, text)
    config.stash[SUMMARY_KEY] = text
    failed = sum(check.status == FAILED for check in checks)
    config.stash[MEAN_FAILURES_KEY] = failed
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if SUMMARY_KEY not in config.stash:
        return
    terminalreporter.write_sep("=", "rf100vl summary")
    terminalreporter.write_line(config.stash[SUMMARY_KEY])
    terminalreporter.write_line(f"results: {config.stash[SESSION_KEY].writer.folder}")
    failed = config.stash[MEAN_FAILURES_KEY]
    if failed:
        terminalreporter.write_line(f"rf100vl: {failed} check(s) of means failed (exit status 1)", red=True, bold=True)
