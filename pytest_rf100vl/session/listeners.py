"""Calling the hooks that act on what the session wrote: ``pytest_rf100vl_row_written`` for each
row as it lands in ``results.jsonl``, ``pytest_rf100vl_results_written`` once the folder is
complete. Their implementations (a conftest's, an experiment tracker's) never cost the results:
one that raises is a warning, and what was written stays as written."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf.redact import scrub
from rf100vl_hf.results.schema import ResultRow

from pytest_rf100vl.core.pairs import Pair


class HookWarning(UserWarning):
    """An implementation of one of the plugin's hooks failed; the results are unchanged."""


def _call(hook: Any, **arguments: Any) -> list[str]:
    """Call every implementation of ``hook`` with the arguments it names; one line per failure."""
    failures = []
    for impl in hook.get_hookimpls():
        try:
            impl.function(**{name: value for name, value in arguments.items() if name in impl.argnames})
        except Exception as exc:  # a listener's failure must not cost the results
            failures.append(scrub(f"{impl.plugin_name}: {type(exc).__name__}: {exc}"))
    return failures


def row_written(config: pytest.Config, pair: Pair, row: ResultRow) -> None:
    """Tell ``pytest_rf100vl_row_written`` of ``row`` (a scrubbed copy); a failure is a warning."""
    hook = config.hook.pytest_rf100vl_row_written
    if not hook.get_hookimpls():
        return
    for failure in _call(hook, config=config, pair=pair, row=row.scrubbed()):
        warnings.warn(HookWarning(f"pytest_rf100vl_row_written of {failure}"), stacklevel=2)


def results_written(config: pytest.Config, folder: Path, rows: list[ResultRow]) -> list[str]:
    """Call ``pytest_rf100vl_results_written``; a line for the summary per implementation that failed."""
    return _call(config.hook.pytest_rf100vl_results_written, config=config, folder=folder, rows=rows)
