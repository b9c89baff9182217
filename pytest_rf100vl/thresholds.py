"""Minimum AP50:95 per pair and per domain mean, and where each minimum came from.

The thresholds file is CSV with the header ``model,target,min_ap`` (blank lines and lines
starting with ``#`` are ignored):

- ``model``: an adapter spec (``owlv2:google/owlv2-base-patch16``), an adapter name
  (``owlv2``, any checkpoint) or ``*`` (every model);
- ``target``: a dataset name (checked when the pair runs: the test fails), a domain name
  (``Aerial``, ``Flora & Fauna``, ... or ``custom``) or ``All`` (checked on the mean over
  the datasets of that domain, or all datasets, that the model ran in the session, at the
  end of the session: reported in the summary and the exit status);
- ``min_ap``: the minimum, in percent, as the paper reports AP.

For a pair, the most specific row wins: the spec, then the adapter name, then ``*``; with no
row, ``--rf100vl-min-ap`` applies; with neither, the pair passes and is reported unchecked.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from rf100vl_hf.errors import DataError

ALL = "All"
COLUMNS = ("model", "target", "min_ap")
ANY_MODEL = "*"


@dataclass(frozen=True)
class Threshold:
    """A minimum and where it came from (shown in failure messages and the summary)."""

    minimum: float
    source: str


@dataclass(frozen=True)
class Rule:
    model: str
    target: str  # a dataset name, a domain in the paper's spelling, or ``All``
    threshold: Threshold

    @property
    def on_mean(self) -> bool:
        """Whether the rule is about a mean (a domain or ``All``) rather than one dataset."""
        from rf100vl_hf.rf100vl.catalog import CUSTOM_DOMAIN, DOMAINS

        return self.target == ALL or self.target in DOMAINS or self.target == CUSTOM_DOMAIN


def _normalize_target(target: str) -> str:
    """Domains in the paper's spelling; ``All`` in any case; anything else is a dataset name."""
    from rf100vl_hf.errors import UnknownNameError
    from rf100vl_hf.rf100vl.catalog import normalize_domain

    if target.lower() == ALL.lower():
        return ALL
    try:
        return normalize_domain(target)
    except UnknownNameError:
        return target


def read_thresholds(path: str | Path) -> list[Rule]:
    """The rules of a thresholds file; a bad row is a DataError naming the line and the column."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file", "thresholds file not found")
    lines = [
        (number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise DataError(path, "header", f"empty file; expected the header {','.join(COLUMNS)}")
    reader = csv.DictReader(line for _, line in lines)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(path, "header", f"missing column(s) {', '.join(missing)}; expected {','.join(COLUMNS)}")
    rules = []
    for (number, _), row in zip(lines[1:], reader):
        where = f"line {number}"
        model, target, value = ((row.get(c) or "").strip() for c in COLUMNS)
        for column, text in (("model", model), ("target", target)):
            if not text:
                raise DataError(path, f"{where}: {column}", "is empty")
        try:
            minimum = float(value)
        except ValueError:
            raise DataError(path, f"{where}: min_ap", f"{value!r} is not a number") from None
        if not math.isfinite(minimum):
            raise DataError(path, f"{where}: min_ap", f"{value!r} is not a finite number")
        rules.append(Rule(model, _normalize_target(target), Threshold(minimum, f"{path.name} {where}")))
    return rules


def _specificity(rule_model: str, spec: str) -> int | None:
    """How closely a rule's model matches a spec (lower is closer); ``None`` when it does not."""
    name = spec.partition(":")[0]
    for rank, candidate in enumerate((spec, name, ANY_MODEL)):
        if rule_model == candidate:
            return rank
    return None


def threshold_for(rules: list[Rule], spec: str, target: str, min_ap: float | None = None) -> Threshold | None:
    """The threshold of ``spec`` on a dataset, domain or ``All``; ``min_ap`` only for datasets."""
    matches = [
        (rank, rule.threshold)
        for rule in rules
        if rule.target == target and (rank := _specificity(rule.model, spec)) is not None
    ]
    if matches:
        return min(matches, key=lambda match: match[0])[1]
    if min_ap is not None:
        return Threshold(min_ap, "--rf100vl-min-ap")
    return None


def mean_targets(rules: list[Rule], spec: str) -> list[str]:
    """The domains (and ``All``) that some rule for ``spec`` sets a minimum mean for."""
    targets = {rule.target for rule in rules if rule.on_mean and _specificity(rule.model, spec) is not None}
    return sorted(t for t in targets if t != ALL) + ([ALL] if ALL in targets else [])


def failure(label: str, ap: float | None, threshold: Threshold) -> str | None:
    """The failure message when ``ap`` (percent; ``None`` when undefined) is below the threshold."""
    if ap is not None and ap >= threshold.minimum:
        return None
    measured = "undefined (no ground-truth box)" if ap is None else f"{ap:.2f}"
    return f"{label}: AP50:95 {measured} is below the minimum {threshold.minimum:.2f} (from {threshold.source})"
