"""The run's summary as markdown, printed at the end of the session and saved as ``summary.md``.

It is the summary ``rf100vl-hf results summary`` writes (:mod:`rf100vl_hf.results.summary`):
what the run ran on, each benchmark kind's own sections over its rows, then model errors and
what only a pytest session knows: checks of means, pairs that could not run or were left out,
and datasets not on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_rf100vl.core.checks import MeanCheck

if TYPE_CHECKING:
    from pytest_rf100vl.kinds.base import BenchmarkKind


def summary(
    rows: list[dict[str, Any]],
    kinds: list["BenchmarkKind"],
    checks: list[MeanCheck],
    missing: dict[str, str],
    errors: dict[str, str],
    left_out: dict[str, str],
    figures: list[str] = (),  # type: ignore[assignment]
) -> str:
    """The whole summary; ``missing`` maps a dataset not on disk to how to get it, ``errors`` a
    pair id to why it could not run, ``left_out`` a pair id to why its model does not answer it."""
    from rf100vl_hf import markdown
    from rf100vl_hf.results.summary import header, tail

    lines = header(rows)
    for kind in kinds:
        own = [row for row in rows if row["benchmark"] == kind.name]
        if own:
            lines += kind.summary_sections(own)
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
    return markdown.document(lines + tail(rows, sections, figures))
