"""The run's summary as markdown, printed at the end of the session and saved as ``summary.md``.

The AP table reads like the paper's Table 2 turned on its side, so that it stays narrow with
many datasets and several models: one row per dataset (grouped by domain, in the paper's
domain order), then one row per domain mean and ``All``; one column per model.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_rf100vl.checks import MeanCheck

SMOKE_BANNER = "SMOKE RUN (random weights: scores are meaningless)"
MISSING = "—"


def _cell(value: float | None) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:.1f}"


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
    """Per pair: throughput, what was done to the model's output, and the threshold check."""
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


def summary(
    rows: list[dict[str, Any]],
    checks: list[MeanCheck],
    missing: dict[str, str],
    errors: dict[str, str],
) -> str:
    """The whole summary; ``missing`` maps a dataset not on disk to how to get it, ``errors`` a
    pair id to why it could not run."""
    lines = ["# rf100vl results", ""]
    if any(row["smoke"] for row in rows):
        lines += [f"**{SMOKE_BANNER}**", ""]
    if rows:
        lines += ["## AP50:95 (%)", "", *ap_table(rows), "", "## Runs", "", *runs_table(rows), ""]
    else:
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
    if missing:
        lines += ["## Datasets not on disk (skipped)", "", ", ".join(missing), "", next(iter(missing.values())), ""]
    return "\n".join(lines)
