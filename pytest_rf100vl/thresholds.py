"""Minimums per pair (AP50:95 for RF100-VL, quadrant accuracy and mIoU for UOUO) and per
domain mean, and where each minimum came from.

The thresholds file is CSV with the columns ``model``, ``target`` and one or more of
``min_ap``, ``min_accuracy``, ``min_miou`` (blank lines and lines starting with ``#`` are
ignored; an empty cell sets no minimum)::

    model,target,min_ap,min_accuracy,min_miou
    owlv2,Aerial,5,,
    *,uouo-mmd,,0.30,0.15

- ``model``: an adapter spec (``owlv2:google/owlv2-base-patch16``), an adapter name
  (``owlv2``, any checkpoint) or ``*`` (every model);
- ``target``: a dataset name (checked when the pair runs: the test fails), a domain name
  (``Aerial``, ``Flora & Fauna``, ... or ``custom``) or ``All`` (checked on the mean over
  the datasets of that domain, or all datasets, that the model ran in the session, at the
  end of the session: reported in the summary and the exit status);
- ``min_ap``: the minimum AP50:95 of an RF100-VL target, in percent, as the paper reports AP;
- ``min_accuracy``, ``min_miou``: the minimum quadrant accuracy and mIoU of a UOUO dataset
  (``uouo-random``, ``uouo-mmd``), fractions in [0, 1] as UOUO's Table 1 reports them.

For a pair, the most specific row with a minimum of that metric wins: the spec, then the
adapter name, then ``*``; with no row, ``--rf100vl-min-ap`` (RF100-VL) or
``--uouo-min-accuracy`` and ``--uouo-min-miou`` (UOUO) apply; with neither, the pair passes
and is reported unchecked.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from rf100vl_hf.errors import DataError

from pytest_rf100vl.selection import UOUO_DATASETS

ALL = "All"
KEYS = ("model", "target")
ANY_MODEL = "*"


@dataclass(frozen=True)
class Metric:
    """A metric that can have a minimum: its results-row key, how messages name and print it."""

    name: str  # the key in results rows; the file's column is ``min_<name>``
    label: str
    digits: int
    uouo: bool  # a UOUO rate (a fraction in [0, 1]) rather than RF100-VL AP in percent

    @property
    def column(self) -> str:
        return f"min_{self.name}"


METRICS: dict[str, Metric] = {
    metric.name: metric
    for metric in (
        Metric("ap", "AP50:95", 2, uouo=False),
        Metric("accuracy", "quadrant accuracy", 4, uouo=True),
        Metric("miou", "mIoU", 4, uouo=True),
    )
}
COLUMNS = tuple(metric.column for metric in METRICS.values())


@dataclass(frozen=True)
class Threshold:
    """A minimum and where it came from (shown in failure messages and the summary)."""

    minimum: float
    source: str


@dataclass(frozen=True)
class Rule:
    model: str
    target: str  # a dataset name, a domain in the paper's spelling, or ``All``
    metric: str  # a key of METRICS
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


def _header(path: Path, fieldnames: list[str]) -> list[Metric]:
    """The metrics whose minimums the file gives; a missing or unknown column is a DataError."""
    expected = f"expected {','.join(KEYS)} and one or more of {', '.join(COLUMNS)}"
    missing = [c for c in KEYS if c not in fieldnames]
    metrics = [metric for metric in METRICS.values() if metric.column in fieldnames]
    if not metrics:
        missing.append(f"{', '.join(COLUMNS[:-1])} or {COLUMNS[-1]}")
    if missing:
        raise DataError(path, "header", f"missing column(s) {', '.join(missing)}; {expected}")
    unknown = [c for c in fieldnames if c not in KEYS + COLUMNS]
    if unknown:
        raise DataError(path, "header", f"unknown column(s) {', '.join(unknown)}; {expected}")
    return metrics


def _minimum(path: Path, where: str, metric: Metric, text: str, target: str) -> float:
    """One cell's minimum, checked against its metric's range and the kind of its target."""
    field = f"{where}: {metric.column}"
    try:
        minimum = float(text)
    except ValueError:
        raise DataError(path, field, f"{text!r} is not a number") from None
    if not math.isfinite(minimum):
        raise DataError(path, field, f"{text!r} is not a finite number")
    if metric.uouo and not 0 <= minimum <= 1:
        raise DataError(path, field, f"{text} is not a fraction in [0, 1] (as in UOUO's Table 1)")
    if metric.uouo != (target in UOUO_DATASETS):
        wanted = f"a UOUO dataset ({', '.join(UOUO_DATASETS)})" if metric.uouo else "an RF100-VL dataset, domain or All"
        raise DataError(path, field, f"applies to {wanted}, not {target!r}")
    return minimum


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
        raise DataError(path, "header", f"empty file; expected the header {','.join(KEYS)},min_ap")
    reader = csv.DictReader(line for _, line in lines)
    metrics = _header(path, list(reader.fieldnames or []))
    rules = []
    for (number, _), row in zip(lines[1:], reader):
        where = f"line {number}"
        model, target = ((row.get(c) or "").strip() for c in KEYS)
        for column, text in (("model", model), ("target", target)):
            if not text:
                raise DataError(path, f"{where}: {column}", "is empty")
        target = _normalize_target(target)
        given = {metric: (row.get(metric.column) or "").strip() for metric in metrics}
        if not any(given.values()):
            raise DataError(path, where, f"no minimum: fill {' or '.join(m.column for m in metrics)}")
        source = f"{path.name} {where}"
        rules.extend(
            Rule(model, target, metric.name, Threshold(_minimum(path, where, metric, text, target), source))
            for metric, text in given.items()
            if text
        )
    return rules


def _specificity(rule_model: str, spec: str) -> int | None:
    """How closely a rule's model matches a spec (lower is closer); ``None`` when it does not."""
    name = spec.partition(":")[0]
    for rank, candidate in enumerate((spec, name, ANY_MODEL)):
        if rule_model == candidate:
            return rank
    return None


def threshold_for(
    rules: list[Rule], spec: str, target: str, metric: str = "ap", default: Threshold | None = None
) -> Threshold | None:
    """The minimum of ``metric`` for ``spec`` on a dataset, domain or ``All``; else ``default``
    (the command line's, which applies to datasets only)."""
    matches = [
        (rank, rule.threshold)
        for rule in rules
        if rule.target == target and rule.metric == metric and (rank := _specificity(rule.model, spec)) is not None
    ]
    if matches:
        return min(matches, key=lambda match: match[0])[1]
    return default


def mean_targets(rules: list[Rule], spec: str) -> list[str]:
    """The domains (and ``All``) that some rule for ``spec`` sets a minimum mean AP for."""
    targets = {
        rule.target
        for rule in rules
        if rule.on_mean and rule.metric == "ap" and _specificity(rule.model, spec) is not None
    }
    return sorted(t for t in targets if t != ALL) + ([ALL] if ALL in targets else [])


def failure(label: str, metric: str, value: float | None, threshold: Threshold) -> str | None:
    """The failure message when ``value`` of ``metric`` (``None`` when undefined) is below the threshold."""
    if value is not None and value >= threshold.minimum:
        return None
    spec = METRICS[metric]
    measured = "undefined (no ground-truth box)" if value is None else f"{value:.{spec.digits}f}"
    return (
        f"{label}: {spec.label} {measured} is below the minimum {threshold.minimum:.{spec.digits}f} "
        f"(from {threshold.source})"
    )


def check_status(checked: list[tuple[float | None, Threshold]]) -> str:
    """``unchecked`` without a threshold; ``failed`` when a value is below its minimum or undefined."""
    if not checked:
        return "unchecked"
    ok = all(value is not None and value >= threshold.minimum for value, threshold in checked)
    return "passed" if ok else "failed"
