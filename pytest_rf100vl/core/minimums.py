"""What can have a minimum, and which minimum applies: a metric a benchmark kind declares, a
minimum with its source, a thresholds-file rule, and the choice of the most specific rule for
a model (the thresholds file itself is read by ``session/thresholds.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from rf100vl_hf.specs import ModelSpec

ANY_MODEL = "*"
ANY_TARGET = "*"
"""A thresholds-file target: every dataset of the metric's kind (each pair; not a mean)."""


@dataclass(frozen=True)
class Metric:
    """A metric that can have a minimum: its results-row key, how messages name and print it,
    and the benchmark kind whose pairs report it."""

    name: str  # the key in results rows; the file's column is ``min_<name>``
    label: str
    digits: int
    kind: str
    fraction: str | None = None
    """For a rate in [0, 1]: where that convention comes from (said when a minimum is outside)."""

    @property
    def column(self) -> str:
        return f"min_{self.name}"


@dataclass(frozen=True)
class Threshold:
    """A minimum and where it came from (shown in failure messages and the summary)."""

    minimum: float
    source: str


@dataclass(frozen=True)
class Rule:
    model: str
    target: str  # a dataset name, ``*`` (every dataset), or a mean's name (a domain, ``All``) as its kind spells it
    metric: str  # a Metric's name
    threshold: Threshold


def _specificity(rule_model: str, spec: ModelSpec) -> int | None:
    """How closely a rule's model matches a spec (lower is closer); ``None`` when it does not."""
    for rank, candidate in enumerate((spec.text, spec.name, ANY_MODEL)):
        if rule_model == candidate:
            return rank
    return None


def threshold_for(rules: list[Rule], spec: ModelSpec, target: str, metric: str = "ap") -> Threshold | None:
    """The minimum of ``metric`` for ``spec`` on a dataset, domain, ``All`` or ``*``, else ``None``."""
    matches = [
        (rank, rule.threshold)
        for rule in rules
        if rule.target == target and rule.metric == metric and (rank := _specificity(rule.model, spec)) is not None
    ]
    if matches:
        return min(matches, key=lambda match: match[0])[1]
    return None


def rule_targets(rules: list[Rule], spec: ModelSpec, metric: str) -> set[str]:
    """The targets that some rule for ``spec`` sets a minimum of ``metric`` for."""
    return {rule.target for rule in rules if rule.metric == metric and _specificity(rule.model, spec) is not None}


def failure(label: str, spec: Metric, value: float | None, threshold: Threshold) -> str | None:
    """The failure message when ``value`` of the metric (``None`` when undefined) is below the threshold."""
    if value is not None and value >= threshold.minimum:
        return None
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
