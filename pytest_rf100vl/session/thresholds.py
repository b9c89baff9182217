"""Minimums per pair and per mean, and where each minimum came from.

The thresholds file is CSV with the columns ``model``, ``target`` and one ``min_<metric>``
column per metric with minimums (each benchmark kind declares its metrics: ``min_ap`` for
RF100-VL, ``min_accuracy`` and ``min_miou`` for UOUO). Blank lines and lines starting with
``#`` are ignored; an empty cell sets no minimum::

    model,target,min_ap,min_accuracy,min_miou
    owlv2,Aerial,5,,
    *,uouo-mmd,,0.30,0.15

- ``model``: an adapter spec (``owlv2:google/owlv2-base-patch16``), an adapter name
  (``owlv2``, any checkpoint) or ``*`` (every model);
- ``target``: a dataset name or ``*`` (every dataset of the metric's kind; checked when the
  pair runs: the test fails), or the name of a mean its kind checks when the session ends
  (RF100-VL: a domain or ``All``), reported in the summary and the exit status. The metric's
  kind checks that the target is one of its own.

For a pair, the most specific row with a minimum of that metric wins: its dataset before
``*``, and for each the spec, then the adapter name, then ``*``; with no row, the pair passes
and is reported unchecked.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from rf100vl_hf.errors import DataError

from pytest_rf100vl.core.minimums import Metric, Rule, Threshold

KEYS = ("model", "target")

TargetCheck = Callable[[Metric, str], str]
"""``check(metric, target)``: the target as the metric's kind spells it, or ``ValueError`` saying
which targets the metric applies to."""


def _header(path: Path, fieldnames: list[str], known: Sequence[Metric]) -> list[Metric]:
    """The metrics whose minimums the file gives; a missing or unknown column is a DataError."""
    columns = tuple(metric.column for metric in known)
    expected = f"expected {','.join(KEYS)} and one or more of {', '.join(columns)}"
    missing = [c for c in KEYS if c not in fieldnames]
    metrics = [metric for metric in known if metric.column in fieldnames]
    if not metrics:
        missing.append(f"{', '.join(columns[:-1])} or {columns[-1]}" if len(columns) > 1 else columns[0])
    if missing:
        raise DataError(path, "header", f"missing column(s) {', '.join(missing)}; {expected}")
    unknown = [c for c in fieldnames if c not in KEYS + columns]
    if unknown:
        raise DataError(path, "header", f"unknown column(s) {', '.join(unknown)}; {expected}")
    return metrics


def _minimum(path: Path, where: str, metric: Metric, text: str) -> float:
    """One cell's minimum, checked against its metric's range."""
    field = f"{where}: {metric.column}"
    try:
        minimum = float(text)
    except ValueError:
        raise DataError(path, field, f"{text!r} is not a number") from None
    if not math.isfinite(minimum):
        raise DataError(path, field, f"{text!r} is not a finite number")
    if metric.fraction and not 0 <= minimum <= 1:
        raise DataError(path, field, f"{text} is not a fraction in [0, 1] ({metric.fraction})")
    return minimum


def read_thresholds(path: str | Path, known: Sequence[Metric], check_target: TargetCheck) -> list[Rule]:
    """The rules of a thresholds file over the ``known`` metrics, each target checked (and
    spelled) by ``check_target``; a bad row is a DataError naming the line and the column."""
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
    metrics = _header(path, list(reader.fieldnames or []), known)
    rules = []
    for (number, _), row in zip(lines[1:], reader):
        where = f"line {number}"
        model, target = ((row.get(c) or "").strip() for c in KEYS)
        for column, text in (("model", model), ("target", target)):
            if not text:
                raise DataError(path, f"{where}: {column}", "is empty")
        given = {metric: (row.get(metric.column) or "").strip() for metric in metrics}
        if not any(given.values()):
            raise DataError(path, where, f"no minimum: fill {' or '.join(m.column for m in metrics)}")
        source = f"{path.name} {where}"
        for metric, text in given.items():
            if not text:
                continue
            minimum = _minimum(path, where, metric, text)
            try:
                spelled = check_target(metric, target)
            except ValueError as exc:
                raise DataError(path, f"{where}: {metric.column}", str(exc)) from None
            rules.append(Rule(model, spelled, metric.name, Threshold(minimum, source)))
    return rules


