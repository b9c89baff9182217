"""UOUO's sections of the summary. The table reads like the UOUO paper's Table 1: one row per
model; mIoU and quadrant accuracy (fractions) on the hard (``mmd``) and ``random`` mosaics."""

from __future__ import annotations

from typing import Any

from rf100vl_hf.markdown import table

from pytest_rf100vl.report.summary import number

UOUO_COLUMNS = (
    ("mIoU mmd", "uouo-mmd", "miou"),
    ("mIoU random", "uouo-random", "miou"),
    ("accuracy mmd", "uouo-mmd", "accuracy"),
    ("accuracy random", "uouo-random", "accuracy"),
)
"""Header, dataset and row key of each column of the UOUO table, in Table 1's order."""


def uouo_table(rows: list[dict[str, Any]]) -> list[str]:
    """Models against mIoU and quadrant accuracy on ``mmd`` and ``random`` mosaics (fractions)."""
    specs = list(dict.fromkeys(row["spec"] for row in rows))
    value = {(row["spec"], row["dataset"], key): row[key] for row in rows for key in ("miou", "accuracy")}
    body = [[spec] + [number(value.get((spec, dataset, key)), 4) for _, dataset, key in UOUO_COLUMNS] for spec in specs]
    header = ["Model", *(name for name, _, _ in UOUO_COLUMNS)]
    return table(header, body, numeric=range(1, len(header)))


def uouo_runs_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per pair: throughput, acc50, unreadable answers, failed mosaics, and the threshold checks."""
    body = []
    for row in rows:
        check = row["check"]
        minimums = [f"{label} >= {row[key]:g}" for label, key in (("accuracy", "min_accuracy"), ("mIoU", "min_miou"))
                    if row[key] is not None]
        if minimums:
            check += f" ({', '.join(minimums)}; {row['threshold_source']})"
        body.append(
            [row["spec"], row["dataset"], f"{row['images_per_s']:.2f}", row["n_images"], number(row["acc50"], 4),
             row["box_parse_failures"], row["quadrant_parse_failures"], row["failed_images"], check]
        )
    header = ["Model", "Dataset", "images/s", "mosaics", "acc50", "no box", "no quadrant", "failed", "threshold"]
    return table(header, body, numeric=range(2, len(header) - 1))


def sections(rows: list[dict[str, Any]]) -> list[str]:
    return ["## UOUO: mIoU and quadrant accuracy (as in its Table 1)", "", *uouo_table(rows), "",
            "## UOUO runs", "", *uouo_runs_table(rows), ""]
