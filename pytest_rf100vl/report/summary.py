"""The run's summary as markdown, printed at the end of the session and saved as ``summary.md``:
a banner for smoke runs, what the run ran on, each benchmark kind's own sections over its
rows, then what every run has: model errors, checks of means, pairs that could not run or
were left out, and datasets not on disk."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pytest_rf100vl.report.checks import MeanCheck

if TYPE_CHECKING:
    from pytest_rf100vl.kinds.base import BenchmarkKind

SMOKE_BANNER = "SMOKE RUN (random weights: scores are meaningless)"
MISSING = "—"


def number(value: float | None, digits: int = 1) -> str:
    """A score for a table cell; undefined scores show as a dash."""
    return MISSING if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def environment(rows: list[dict[str, Any]]) -> str:
    """One line saying what the run ran on: devices and dtypes, and the versions of what scores depend on."""
    devices = ", ".join(dict.fromkeys(f"{row['device']} ({row['dtype']})" for row in rows))
    versions = {
        key.removesuffix("_version").replace("_", "-"): value
        for row in rows[:1]
        for key, value in row.items()
        if key.endswith("_version") and value
    }
    return f"Ran on {devices}; " + ", ".join(f"{name} {value}" for name, value in versions.items())


def summary(
    rows: list[dict[str, Any]],
    kinds: list["BenchmarkKind"],
    checks: list[MeanCheck],
    missing: dict[str, str],
    errors: dict[str, str],
    left_out: dict[str, str],
) -> str:
    """The whole summary; ``missing`` maps a dataset not on disk to how to get it, ``errors`` a
    pair id to why it could not run, ``left_out`` a pair id to why its model does not answer it."""
    lines = ["# rf100vl results", ""]
    if any(row["smoke"] for row in rows):
        lines += [f"**{SMOKE_BANNER}**", ""]
    if rows:
        lines += [environment(rows), ""]
    for kind in kinds:
        own = [row for row in rows if row["benchmark"] == kind.name]
        if own:
            lines += kind.summary_sections(own)
    if not rows:
        lines += ["No pair ran.", ""]
    failed_images = [row for row in rows if row["first_error"]]
    if failed_images:
        lines += ["## Model errors (first of each pair; the full traceback is in results.jsonl)", ""]
        lines += [f"- {row['spec']} on {row['dataset']}: {row['failed_images']} image(s) failed; "
                  f"{row['first_error'].strip().splitlines()[-1]}" for row in failed_images]
        lines += [""]
    if checks:
        lines += ["## Checks of means", ""]
        lines += [f"- {c.status.upper()}: {c.model} on {c.target}: {c.message}" for c in checks]
        lines += [""]
    if errors:
        lines += ["## Pairs that could not run", ""] + [f"- {pair}: {why}" for pair, why in errors.items()] + [""]
    if left_out:
        lines += ["## Pairs left out (the model does not answer that benchmark)", ""]
        lines += [f"- {pair}: {why}" for pair, why in left_out.items()] + [""]
    if missing:
        lines += ["## Datasets not on disk (skipped)", "", ", ".join(missing), "", next(iter(missing.values())), ""]
    return "\n".join(lines)
