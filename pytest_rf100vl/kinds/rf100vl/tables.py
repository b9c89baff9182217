"""RF100-VL's sections of the summary. The AP table reads like the paper's Table 2 turned on
its side, so it stays narrow with many datasets and several models: one row per dataset
(grouped by domain, in the paper's domain order), then one row per domain mean and ``All``;
one column per model."""

from __future__ import annotations

from typing import Any

from rf100vl_hf.markdown import table

from pytest_rf100vl.report.summary import number


def ap_table(rows: list[dict[str, Any]]) -> list[str]:
    """Datasets, then domain means and ``All``, against models (AP50:95, percent)."""
    from rf100vl_hf.metrics.aggregate import ORDER, domain_means

    specs = list(dict.fromkeys(row["spec"] for row in rows))
    domain_of = {row["dataset"]: row["domain"] for row in rows}
    datasets = sorted(domain_of, key=lambda name: (ORDER.index(domain_of[name]), name))
    ap = {(row["spec"], row["dataset"]): row["ap"] for row in rows}
    body = [[name, domain_of[name]] + [number(ap.get((spec, name))) for spec in specs] for name in datasets]
    means: dict[str, dict[str, float]] = {}
    for spec in specs:
        defined = [(name, domain_of[name], v) for (s, name), v in ap.items() if s == spec and v is not None]
        if defined:
            means[spec] = {target: mean.mean for target, mean in domain_means(defined).items()}
    targets = list(dict.fromkeys(target for by_target in means.values() for target in by_target))
    body += [[f"**{t}**", "mean"] + [number(means.get(spec, {}).get(t)) for spec in specs] for t in targets]
    return table(["Dataset", "Domain", *specs], body, numeric=range(2, 2 + len(specs)))


def runs_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per pair: throughput, what was done to the model's output, and the threshold check."""
    body = []
    for row in rows:
        check = row["check"]
        if row["min_ap"] is not None:
            check += f" (>= {row['min_ap']:g}, {row['threshold_source']})"
        body.append(
            [row["spec"], row["dataset"], f"{row['images_per_s']:.2f}", row["n_images"], row["n_predictions"],
             row["dropped"], row["clipped"], row["truncated"], row["failed_images"], check]
        )
    header = ["Model", "Dataset", "images/s", "images", "predictions", "dropped", "clipped", "truncated", "failed",
              "threshold"]
    return table(header, body, numeric=range(2, len(header) - 1))


def sections(rows: list[dict[str, Any]]) -> list[str]:
    return ["## AP50:95 (%)", "", *ap_table(rows), "", "## Runs", "", *runs_table(rows), ""]
