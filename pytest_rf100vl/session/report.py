"""The run's summary as markdown, printed at the end of the session and saved as ``summary.md``.

It is the summary ``rf100vl-hf results summary`` writes (:mod:`rf100vl_hf.results.summary`):
what the run ran on, each benchmark kind's own sections over its rows, then model errors and
what only a pytest session knows: checks of means, pairs that could not run or were left out,
and datasets not on disk.
"""

from __future__ import annotations

from rf100vl_hf import markdown
from rf100vl_hf.results.schema import ResultRow
from rf100vl_hf.results.summary import header, tail

from pytest_rf100vl.kinds.base import Report


def summary(
    rows: list[ResultRow],
    reports: dict[str, Report],
    missing: dict[str, str],
    errors: dict[str, str],
    left_out: dict[str, str],
) -> str:
    """The whole summary; ``reports`` holds each kind's part (its sections over its rows, its
    checks of means), ``missing`` maps a dataset not on disk to how to get it, ``errors`` a pair
    id to why it could not run, ``left_out`` a pair id to why its model does not answer it."""
    lines = header(rows)
    benchmarks = {row.data.benchmark for row in rows}
    for name, report in reports.items():
        if name in benchmarks:
            lines += report.sections
    checks = [check for report in reports.values() for check in report.checks]
    sections = []
    if checks:
        sections.append(("Checks of means", [f"- {c.status.upper()}: {c.model} on {c.target}: {c.message}"
                                             for c in checks]))
    if errors:
        sections.append(("Pairs that could not run", [f"- {pair}: {why}" for pair, why in errors.items()]))
    if left_out:
        sections.append(("Pairs left out (the model does not answer that benchmark)",
                         [f"- {pair}: {why}" for pair, why in left_out.items()]))
    if missing:
        sections.append(("Datasets not on disk (skipped)", [", ".join(missing), "", next(iter(missing.values()))]))
    return markdown.document(lines + tail(rows, sections))
