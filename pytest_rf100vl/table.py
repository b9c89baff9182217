"""The run's summary as markdown, printed at the end of the session and saved as ``summary.md``.

The AP table reads like the RF100-VL paper's Table 2 turned on its side, so that it stays
narrow with many datasets and several models: one row per dataset (grouped by domain, in
the paper's domain order), then one row per domain mean and ``All``; one column per model.
The UOUO table reads like the UOUO paper's Table 1: one row per model; mIoU and quadrant
accuracy (fractions) on the hard (``mmd``) and ``random`` mosaics.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_rf100vl.checks import MeanCheck

SMOKE_BANNER = "SMOKE RUN (random weights: scores are meaningless)"
MISSING = "—"


UOUO_COLUMNS = (
    ("mIoU mmd", "uouo-mmd", "miou"),
    ("mIoU random", "uouo-random", "miou"),
    ("accuracy mmd", "uouo-mmd", "accuracy"),
    ("accuracy random", "uouo-random", "accuracy"),
)
"""Header, dataset and row key of each column of the UOUO table, in Table 1's order."""


def _cell(value: float | None, digits: int = 1) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _markdown(header: list[str], rows: list[list[str]], numeric: range) -> list[str]:
    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    return ["| " + " | ".join(line) + " |" for line in (header, align, *rows)]


def ap_table(rows: list[dict[str, Any]]) -> list[str]:
    """Datasets, then domain means and ``All``, against models (AP50:95, percent)."""
    from rf100vl_hf.metrics.aggregate import ORDER, domain_means

    specs = list(dict.fromkeys(row["spec"] for row in rows))
    domain_of = {row["dataset"]: row["domain"] for row in rows}
    datasets = sorted(domain_of, key=lambda name: (ORDER.index(domain_of[name]), name))
    ap = {(row["spec"], row["dataset"]): row["ap"] for row in rows}
    body = [[name, domain_of[name]] + [_cell(ap.get((spec, name))) for spec in specs] for name in datasets]
    means: dict[str, dict[str, float]] = {}
    for spec in specs:
        defined = [(name, domain_of[name], v) for (s, name), v in ap.items() if s == spec and v is not None]
        if defined:
            means[spec] = {target: mean.mean for target, mean in domain_means(defined).items()}
    targets = list(dict.fromkeys(target for by_target in means.values() for target in by_target))
    body += [[f"**{t}**", "mean"] + [_cell(means.get(spec, {}).get(t)) for spec in specs] for t in targets]
    return _markdown(["Dataset", "Domain", *specs], body, numeric=range(2, 2 + len(specs)))


def runs_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per RF100-VL pair: throughput, what was done to the model's output, and the threshold check."""
    body = []
    for row in rows:
        check = row["check"]
        if row["min_ap"] is not None:
            check += f" (>= {row['min_ap']:g}, {row['threshold_source']})"
        body.append(
            [row["spec"], row["dataset"], f"{row['images_per_s']:.2f}", str(row["n_images"]), str(row["n_predictions"]),
             str(row["dropped"]), str(row["clipped"]), str(row["truncated"]), str(row["failed_images"]), check]
        )
    header = ["Model", "Dataset", "images/s", "images", "predictions", "dropped", "clipped", "truncated", "failed",
              "threshold"]
    return _markdown(header, body, numeric=range(2, len(header) - 1))


def uouo_table(rows: list[dict[str, Any]]) -> list[str]:
    """Models against mIoU and quadrant accuracy on ``mmd`` and ``random`` mosaics (fractions)."""
    specs = list(dict.fromkeys(row["spec"] for row in rows))
    value = {(row["spec"], row["dataset"], key): row[key] for row in rows for key in ("miou", "accuracy")}
    body = [[spec] + [_cell(value.get((spec, dataset, key)), 4) for _, dataset, key in UOUO_COLUMNS] for spec in specs]
    header = ["Model", *(name for name, _, _ in UOUO_COLUMNS)]
    return _markdown(header, body, numeric=range(1, len(header)))


def uouo_runs_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per UOUO pair: throughput, acc50, unreadable answers, failed mosaics, and the threshold checks."""
    body = []
    for row in rows:
        check = row["check"]
        minimums = [f"{label} >= {row[key]:g}" for label, key in (("accuracy", "min_accuracy"), ("mIoU", "min_miou"))
                    if row[key] is not None]
        if minimums:
            check += f" ({', '.join(minimums)}; {row['threshold_source']})"
        body.append(
            [row["spec"], row["dataset"], f"{row['images_per_s']:.2f}", str(row["n_images"]), _cell(row["acc50"], 4),
             str(row["box_parse_failures"]), str(row["quadrant_parse_failures"]), str(row["failed_images"]), check]
        )
    header = ["Model", "Dataset", "images/s", "mosaics", "acc50", "no box", "no quadrant", "failed", "threshold"]
    return _markdown(header, body, numeric=range(2, len(header) - 1))


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
    checks: list[MeanCheck],
    missing: dict[str, str],
    errors: dict[str, str],
    left_out: dict[str, str],
) -> str:
    """The whole summary; ``missing`` maps a dataset not on disk to how to get it, ``errors`` a
    pair id to why it could not run, ``left_out`` a pair id to why its model does not answer it."""
    detection = [row for row in rows if row["benchmark"] == "rf100vl"]
    grounding = [row for row in rows if row["benchmark"] == "uouo"]
    lines = ["# rf100vl results", ""]
    if any(row["smoke"] for row in rows):
        lines += [f"**{SMOKE_BANNER}**", ""]
    if rows:
        lines += [environment(rows), ""]
    if detection:
        lines += ["## AP50:95 (%)", "", *ap_table(detection), "", "## Runs", "", *runs_table(detection), ""]
    if grounding:
        lines += ["## UOUO: mIoU and quadrant accuracy (as in its Table 1)", "", *uouo_table(grounding), ""]
        lines += ["## UOUO runs", "", *uouo_runs_table(grounding), ""]
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
