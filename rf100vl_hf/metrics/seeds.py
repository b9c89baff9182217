"""How much a fine-tuned model's scores move with its seed, as the RF100-VL paper reports it,
and whether two methods differ beyond that.

- Table 8: the standard deviation, across seeds, of the domain mean (each seed's mean over
  the domain's datasets);
- Table 9: the mean, over the domain's datasets, of each dataset's standard deviation across
  seeds.

Both use the sample standard deviation (``ddof=1``). ``All`` is the mean over every dataset,
as the paper's ``All`` column is. Every seed must have scored the same datasets: a missing
(dataset, seed) is an error, since a mean over other datasets is another number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rf100vl_hf.errors import needs_extra
from rf100vl_hf.metrics.aggregate import ALL, ORDER


@dataclass(frozen=True)
class SeedSpread:
    mean: float  # the mean over seeds of the domain mean
    std_of_mean: float | None  # Table 8 (None with one seed)
    mean_of_std: float | None  # Table 9
    seeds: int
    datasets: int


def _scores(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[int, float]]:
    """(domain, dataset) -> seed -> AP, for rows with a finite AP."""
    table: dict[tuple[str, str], dict[int, float]] = {}
    for row in rows:
        ap = row.get("ap")
        if isinstance(ap, (int, float)) and math.isfinite(ap):
            table.setdefault((row.get("domain") or "custom", row["dataset"]), {})[row.get("seed")] = float(ap)
    return table


def _std(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def seed_variance(rows: Iterable[dict[str, Any]]) -> dict[str, SeedSpread]:
    """Per domain (in the paper's order) and ``All``: the mean and both spreads over seeds."""
    table = _scores(rows)
    seeds = sorted({seed for by_seed in table.values() for seed in by_seed}, key=str)
    missing = [f"{dataset} (seed {seed})" for (_, dataset), by_seed in table.items() for seed in seeds
               if seed not in by_seed]
    if missing:
        raise ValueError(f"every seed must score the same datasets; missing: {', '.join(missing)}")
    groups: dict[str, list[dict[int, float]]] = {}
    for (domain, _), by_seed in sorted(table.items(), key=lambda item: (ORDER.index(item[0][0])
                                       if item[0][0] in ORDER else len(ORDER), item[0][1])):
        groups.setdefault(domain, []).append(by_seed)
    if groups:
        groups[ALL] = [by_seed for domain, members in groups.items() for by_seed in members]
    out = {}
    for target, members in groups.items():
        means = [statistics.fmean(by_seed[seed] for by_seed in members) for seed in seeds]
        stds = [_std([by_seed[seed] for seed in seeds]) for by_seed in members]
        out[target] = SeedSpread(statistics.fmean(means), _std(means),
                                 statistics.fmean(stds) if len(seeds) > 1 else None,  # type: ignore[arg-type]
                                 len(seeds), len(members))
    return out


@dataclass(frozen=True)
class Significance:
    test: str
    statistic: float
    p_value: float
    n: int
    mean_difference: float  # a - b, in AP points
    statement: str


def _all_means(rows: Iterable[dict[str, Any]]) -> dict[Any, float]:
    """Seed -> the mean AP over every dataset that seed scored."""
    by_seed: dict[Any, list[float]] = {}
    for (_, _), scores in _scores(rows).items():
        for seed, ap in scores.items():
            by_seed.setdefault(seed, []).append(ap)
    return {seed: statistics.fmean(values) for seed, values in by_seed.items()}


def significance(a_rows: Sequence[dict[str, Any]], b_rows: Sequence[dict[str, Any]], a: str = "A", b: str = "B",
                 alpha: float = 0.05) -> Significance:
    """Whether ``a`` scores differently from ``b``: Welch's t-test over the seeds' ``All`` means
    when both have at least two seeds, else the Wilcoxon signed-rank test over the datasets both
    scored (each dataset's mean over seeds)."""
    with needs_extra("the significance test"):
        from scipy import stats

    a_means, b_means = _all_means(a_rows), _all_means(b_rows)
    if len(a_means) >= 2 and len(b_means) >= 2:
        result = stats.ttest_ind(list(a_means.values()), list(b_means.values()), equal_var=False)
        test, n = f"Welch t-test over seeds ({len(a_means)} and {len(b_means)})", len(a_means) + len(b_means)
        difference = statistics.fmean(a_means.values()) - statistics.fmean(b_means.values())
    else:
        a_sets = {dataset: statistics.fmean(s.values()) for (_, dataset), s in _scores(a_rows).items()}
        b_sets = {dataset: statistics.fmean(s.values()) for (_, dataset), s in _scores(b_rows).items()}
        shared = sorted(set(a_sets) & set(b_sets))
        differences = [a_sets[d] - b_sets[d] for d in shared]
        if len(shared) < 2 or not any(differences):
            return Significance("Wilcoxon signed-rank test over datasets", math.nan, 1.0, len(shared),
                                statistics.fmean(differences) if differences else 0.0,
                                f"{a} and {b} cannot be told apart on {len(shared)} shared dataset(s)")
        result = stats.wilcoxon(differences)
        test, n, difference = f"Wilcoxon signed-rank test over {len(shared)} datasets", len(shared), \
            statistics.fmean(differences)
    p = float(result.pvalue)
    higher = f"{a} is higher than {b}" if difference >= 0 else f"{a} is lower than {b}"
    verdict = "significant" if p < alpha else "not significant"
    return Significance(test, float(result.statistic), p, n, difference,
                        f"{higher} by {abs(difference):.2f} AP ({test}, p = {p:.3g}): {verdict} at {alpha:g}")
