"""Domain means as the RF100-VL paper reports them.

A domain's score is the unweighted mean over that domain's datasets; "All" is the unweighted
mean over every dataset run, not the mean of the domain means (the domains hold 6 to 23
datasets, so the two differ).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable

from rf100vl_hf.catalog import ALL, CUSTOM_DOMAIN, DOMAINS, normalize_domain

ORDER: tuple[str, ...] = (*DOMAINS, CUSTOM_DOMAIN)
"""The paper's column order, then datasets that are not in the catalogue."""


@dataclass(frozen=True)
class DomainMean:
    """A mean and how many datasets it covers, so a partial run cannot pass for a full one."""

    mean: float
    datasets: int


def domain_means(rows: Iterable[tuple[str, str, float]]) -> dict[str, DomainMean]:
    """Per-domain and overall means of ``(dataset, domain, value)`` rows.

    Keys follow :data:`ORDER` (only the domains present), then :data:`ALL`. Domains may be
    spelled as the catalogue accepts them (``Flora/Fauna``, ``Sport``, ...). A dataset given
    twice or a non-finite value is an error: either would silently skew the means.
    """
    by_domain: dict[str, list[float]] = {}
    seen: set[str] = set()
    for dataset, domain, value in rows:
        if dataset in seen:
            raise ValueError(f"dataset {dataset!r} appears twice; each dataset counts once in a mean")
        seen.add(dataset)
        if not math.isfinite(value):
            raise ValueError(f"dataset {dataset!r} has no finite score ({value}); a mean over it is undefined")
        by_domain.setdefault(normalize_domain(domain), []).append(float(value))
    if not seen:
        raise ValueError("no scores to aggregate")
    means = {
        domain: DomainMean(statistics.fmean(by_domain[domain]), len(by_domain[domain]))
        for domain in ORDER
        if domain in by_domain
    }
    every = [value for values in by_domain.values() for value in values]
    means[ALL] = DomainMean(statistics.fmean(every), len(every))
    return means
