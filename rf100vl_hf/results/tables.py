"""The results tables as the papers lay them out, in markdown, csv and LaTeX.

- :func:`ap_table`: RF100-VL's Table 2 turned on its side, so that it stays narrow with many
  datasets and several models: one row per dataset (grouped by domain, in the paper's domain
  order), then one row per domain mean and ``All``; one column per model.
- :func:`leaderboard`: the same means the other way round, one row per model against the
  seven domains and ``All`` (the Hub card's leaderboard).
- :func:`per_class_tables`: per dataset, each class's AP per model.
- :func:`uouo_table`: UOUO's Table 1: one row per model; mIoU and quadrant accuracy
  (fractions) on the hard (``mmd``) and ``random`` mosaics.

A model's column is its display name (:mod:`.names`: ``replay(oracle)`` for
``predictions:/runs/oracle``; the row keeps the full spec); when the rows hold several prompt
modes, splits or protocols, the label adds them, and a row of a limited run
(``--rf100vl-limit N``) is labelled ``[first N]``, so that two ways of running one model never
share a cell. A leaderboard ranks the rows of one protocol only (:func:`by_protocol`). A model with
a smoke row (random weights) ends its label with :data:`SMOKE_MARK` in every format.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rf100vl_hf import markdown
from rf100vl_hf.catalog import CUSTOM_DOMAIN, DOMAINS, normalize_domain
from rf100vl_hf.controls import one_line
from rf100vl_hf.protocols import PAPER, PROTOCOLS
from rf100vl_hf.results.names import display_names
from rf100vl_hf.results.schema import AnyRow, ResultRow, as_rows

MISSING = "—"
METRICS: dict[str, str] = {"ap": "AP50:95", "ap50": "AP50", "ap75": "AP75"}
"""Row key -> the name the paper prints (values in percent)."""
ERROR_METRICS: dict[str, str] = {f"tide_{name}": label for name, label in (
    ("cls", "Cls"), ("loc", "Loc"), ("both", "Both"), ("dupe", "Dupe"), ("bkg", "Bkg"), ("miss", "Miss"),
    ("fp", "FP oracle"), ("fn", "FN oracle"))}
"""Row key -> the header of a TIDE ΔAP50 (AP points: ``docs/errors.md``), in tidecv's order."""
FORMATS = ("md", "csv", "latex")
SMOKE_MARK = "(smoke)"
"""Ends the label of a model with a smoke row: random weights (or a replay of them), scores mean nothing."""
SMOKE_NOTE = f"{SMOKE_MARK}: random weights, scores mean nothing"

UOUO_COLUMNS = (
    ("mIoU mmd", "uouo-mmd", "miou"),
    ("mIoU random", "uouo-random", "miou"),
    ("accuracy mmd", "uouo-mmd", "accuracy"),
    ("accuracy random", "uouo-random", "accuracy"),
)
"""Header, dataset and row key of each column of the UOUO table, in Table 1's order."""


@dataclass
class Table:
    """A table ready to render: text cells stay as they are, numbers get ``digits`` decimals and
    None or NaN prints as a dash; rows in ``emphasis`` are means (bold in md and LaTeX)."""

    header: list[str]
    rows: list[list[Any]]
    numeric: range
    digits: int = 1
    emphasis: set[int] = field(default_factory=set)
    title: str = ""


def decimal(value: Any, digits: int = 1) -> str:
    """A number with ``digits`` decimals, a dash where there is none, text as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return MISSING if not math.isfinite(value) else f"{value:.{digits}f}"
    return plain(value)


def plain(value: Any) -> str:
    """A value as it is (a count, a name), a dash where there is none."""
    return MISSING if value is None else str(value)


def _text(table: Table) -> list[list[str]]:
    return [[decimal(value, table.digits) if i in table.numeric else str(value) for i, value in enumerate(row)]
            for row in table.rows]


def to_markdown(table: Table) -> list[str]:
    rows = _text(table)
    for index in table.emphasis:
        rows[index][0] = f"**{rows[index][0]}**"
    return markdown.table(table.header, rows, numeric=table.numeric)


def to_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([one_line(value) for value in table.header])  # a name from a row cannot act on a terminal
    writer.writerows([["" if value == MISSING else one_line(value) for value in row] for row in _text(table)])
    return out.getvalue()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", MISSING: "--"}


def latex_escape(text: str) -> str:
    """``text`` as one line of LaTeX: its special characters escaped, and control characters
    (which stop LaTeX) written as their escapes (:func:`rf100vl_hf.controls.one_line`)."""
    return "".join(_LATEX_SPECIAL.get(char, char) for char in one_line(text))


def to_latex(table: Table) -> str:
    """A ``booktabs`` tabular (``\\usepackage{booktabs}``), a rule above the means."""
    align = "".join("r" if i in table.numeric else "l" for i in range(len(table.header)))
    lines = [f"\\begin{{tabular}}{{{align}}}", "\\toprule",
             " & ".join(latex_escape(h) for h in table.header) + " \\\\", "\\midrule"]
    for index, row in enumerate(_text(table)):
        cells = [latex_escape(value) for value in row]
        if index in table.emphasis:
            if index - 1 not in table.emphasis:
                lines.append("\\midrule")
            cells[0] = f"\\textbf{{{cells[0]}}}"
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def render(table: Table, fmt: str) -> str:
    """The table as ``md``, ``csv`` or ``latex`` text."""
    if fmt == "md":
        return "\n".join(to_markdown(table)) + "\n"
    if fmt == "csv":
        return to_csv(table)
    if fmt == "latex":
        return to_latex(table)
    raise ValueError(f"unknown table format {fmt!r}; known: {', '.join(FORMATS)}")


# ---------------------------------------------------------------- layouts


def _model_label(row: dict[str, Any], names: dict[str, str]) -> str:
    """A row's display name, marked when the row scored only the first images of its split."""
    name = names[row.spec]
    return f"{name} [first {row.data.limit}]" if row.data.limit else name


def _hyperparameters(row: ResultRow) -> dict[str, Any]:
    text = None if row.training is None else row.training.hyperparameters
    return json.loads(text) if isinstance(text, str) else {}


def _varying_hyperparameters(rows: Sequence[ResultRow]) -> list[str]:
    """The hyper-parameters whose values differ among the rows (each fine-tuned the same way otherwise)."""
    sets = [values for values in map(_hyperparameters, rows) if values]
    keys = dict.fromkeys(key for values in sets for key in values)
    return [key for key in keys if len({json.dumps(values.get(key)) for values in sets}) > 1]


def by_protocol(rows: Sequence[ResultRow]) -> dict[str, list[ResultRow]]:
    """The rows of each protocol (``paper`` first, then in the order met): rows of two protocols
    are two benchmarks' results and are never ranked together."""
    groups: dict[str, list[ResultRow]] = {PAPER: []}
    for row in rows:
        groups.setdefault(row.protocol, []).append(row)
    return {name: own for name, own in groups.items() if own}


def protocol_note(name: str) -> str:
    """How a summary or card titles the rows of a protocol."""
    known = PROTOCOLS.get(name)
    return f"protocol {name}" + (f" ({known.description})" if known else "")


def column_labels(rows: Sequence[ResultRow]) -> list[str]:
    """Each row's column: its display name (marked when limited), plus its prompt mode, split,
    training split, recipe and protocol when the rows hold several, the hyper-parameters that
    differ between fine-tuned rows, and :data:`SMOKE_MARK` when a row of the column is smoke.
    Rows that differ only by seed share a column (:func:`over_seeds` averages them)."""
    varying = [key for key in ("prompt", "split", "train_split", "recipe")
               if len({row.column(key) for row in rows}) > 1]
    protocols = len({row.protocol for row in rows}) > 1
    tuned = _varying_hyperparameters(rows)
    names = display_names(row.spec for row in rows)

    def label(row: ResultRow) -> str:
        parts = [_model_label(row, names)] + [f"[{row.column(key) or 'zero-shot'}]" for key in varying]
        if protocols:
            parts.append(f"[{row.protocol}]")
        values = _hyperparameters(row)
        if tuned and values:
            parts.append("[" + ", ".join(f"{key}={values.get(key)}" for key in tuned) + "]")
        return " ".join(parts)

    labels = [label(row) for row in rows]
    smoke = {label for label, row in zip(labels, rows) if row.model.smoke}
    return [f"{label} {SMOKE_MARK}" if label in smoke else label for label in labels]


def _metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    return metric


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _value(row: ResultRow, key: str) -> float | None:
    return _finite(row.column(key))


def _domain(row: ResultRow) -> str:
    from rf100vl_hf.metrics.aggregate import ORDER

    try:
        domain = normalize_domain(getattr(row.data_extra, "domain", None) or CUSTOM_DOMAIN)
    except (KeyError, ValueError):
        domain = CUSTOM_DOMAIN
    return domain if domain in ORDER else CUSTOM_DOMAIN


SEEDED_METRICS = ("ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar500", "ar100")


def over_seeds(rows: Sequence[AnyRow]) -> list[ResultRow]:
    """Rows that differ only by ``seed`` (one fine-tuned pair per seed) as one row of the first
    seed's columns, each metric the mean over the seeds that scored it and ``seeds`` their number;
    rows without a seed pass unchanged."""

    groups: dict[str, list[ResultRow]] = {}
    for row in as_rows(rows):
        key = json.dumps([value for k, value in row.identity().items() if k != "seed"] + [row.model.spec], default=str)
        groups.setdefault(key, []).append(row)
    merged = []
    for group in groups.values():
        if len(group) == 1 or all(row.seed is None for row in group):
            merged.extend(group)
            continue
        means = {}
        for key in SEEDED_METRICS:
            values = [v for v in (_value(other, key) for other in group) if v is not None]
            means[key] = statistics.fmean(values) if values else None
        merged.append(group[0].with_columns(**means, seeds=len(group)))
    return merged


def domain_scores(rows: Sequence[AnyRow], metric: str = "ap") -> dict[str, dict[str, float]]:
    """Model column -> domain (and ``All``) -> mean of the metric (one of :data:`METRICS` or
    :data:`ERROR_METRICS`) over the datasets scored (over the seeds first, for a model
    fine-tuned with several)."""
    merged = over_seeds(rows)
    return _means(merged, column_labels(merged), metric)


def _means(rows: Sequence[ResultRow], labels: Sequence[str], metric: str) -> dict[str, dict[str, float]]:
    """:func:`domain_scores` of rows already merged over seeds, each under its column ``labels``
    (worked out once by a caller that asks for several metrics); a dataset scored twice in a
    column counts with its last row."""
    from rf100vl_hf.metrics.aggregate import domain_means

    key = metric if metric in ERROR_METRICS else _metric(metric)
    by_column: dict[str, dict[str, tuple[str, str, float]]] = {}
    for label, row in zip(labels, rows):
        values = by_column.setdefault(label, {})
        value = _value(row, key)
        if value is not None:
            dataset = row.data.dataset
            values.pop(dataset, None)  # the last row of a dataset counts, in the place of that row
            values[dataset] = (dataset, _domain(row), value)
    return {label: ({t: m.mean for t, m in domain_means(values.values()).items()} if values else {})
            for label, values in by_column.items()}


def ap_table(rows: Sequence[AnyRow], metric: str = "ap") -> Table:
    """Datasets, then domain means and ``All``, against models (percent; a model fine-tuned with
    several seeds: their mean)."""
    from rf100vl_hf.metrics.aggregate import ORDER

    key = _metric(metric)
    rows = over_seeds(rows)
    labels = column_labels(rows)
    columns = list(dict.fromkeys(labels))
    domain_of = {row.data.dataset: _domain(row) for row in rows}
    datasets = sorted(domain_of, key=lambda name: (ORDER.index(domain_of[name]), name))
    value = {(label, row.data.dataset): _value(row, key) for label, row in zip(labels, rows)}
    body: list[list[Any]] = [[name, domain_of[name], *(value.get((c, name)) for c in columns)] for name in datasets]
    means = _means(rows, labels, metric)
    targets = list(dict.fromkeys(target for by_target in means.values() for target in by_target))
    first_mean = len(body)
    body += [[target, "mean", *(means[c].get(target) for c in columns)] for target in targets]
    return Table(["Dataset", "Domain", *columns], body, range(2, 2 + len(columns)),
                 emphasis=set(range(first_mean, len(body))), title=f"{METRICS[key]} (%)")


def leaderboard(rows: Sequence[AnyRow], metric: str = "ap") -> Table:
    """Models against the seven domains and ``All`` (percent), best ``All`` first; a domain no
    row covers prints as a dash. The rows must be of one protocol (a ``ValueError`` otherwise:
    rank each of :func:`by_protocol` apart)."""
    from rf100vl_hf.metrics.aggregate import ALL

    rows = as_rows(rows)
    protocols = list(by_protocol(rows))
    if len(protocols) > 1:
        raise ValueError(f"rows of the protocols {', '.join(protocols)} never rank together: make one leaderboard "
                         "per protocol")
    means = domain_scores(rows, metric)
    targets = [*DOMAINS, *([CUSTOM_DOMAIN] if any(CUSTOM_DOMAIN in m for m in means.values()) else []), ALL]
    ranked = sorted(means, key=lambda c: -(means[c].get(ALL) if means[c].get(ALL) is not None else -math.inf))
    body = [[column, *(means[column].get(t) for t in targets)] for column in ranked]
    return Table(["Model", *targets], body, range(1, 1 + len(targets)), title=f"{METRICS[_metric(metric)]} (%)")


def per_class_tables(rows: Sequence[AnyRow], metric: str = "ap") -> list[Table]:
    """Per dataset: each class's AP (``ap`` or ``ap50``, percent) per model, with its number of
    instances; rows without per-class results are left out."""
    if metric not in ("ap", "ap50"):
        raise ValueError(f"per-class tables have ap and ap50, not {metric!r}")
    rows = as_rows(rows)
    labels = column_labels(rows)
    by_dataset: dict[str, list[tuple[str, ResultRow]]] = {}
    for label, row in zip(labels, rows):
        if getattr(row.scores, "per_class", None):
            by_dataset.setdefault(row.data.dataset, []).append((label, row))
    tables = []
    for dataset, entries in by_dataset.items():
        columns = list(dict.fromkeys(label for label, _ in entries))
        classes: dict[str, dict[str, Any]] = {}
        instances: dict[str, Any] = {}
        for label, row in entries:
            for item in row.scores.per_class:
                classes.setdefault(item["class"], {})[label] = _finite(item.get(metric))
                instances.setdefault(item["class"], item.get("n_instances"))
        body = [[name, plain(instances[name]), *(values.get(c) for c in columns)] for name, values in classes.items()]
        tables.append(Table(["Class", "Instances", *columns], body, range(2, 2 + len(columns)),
                            title=f"{dataset}: {METRICS[metric]} per class (%)"))
    return tables


def error_tables(rows: Sequence[AnyRow]) -> dict[str, Table]:
    """Model column -> (for a model with TIDE columns) AP50 and the ΔAP50 of each error type and
    oracle (AP points), as means over each domain's datasets and over all (``docs/errors.md``)."""
    explained = over_seeds([row for row in as_rows(rows)
                            if row.errors is not None and _finite(row.errors.tide_miss) is not None])
    labels = column_labels(explained)
    means = {key: _means(explained, labels, key) for key in ("ap50", *ERROR_METRICS)} if explained else {"ap50": {}}
    tables = {}
    for label in means["ap50"]:
        targets = list(dict.fromkeys(target for key in means for target in means[key].get(label, {})))
        body = [[target, *(means[key].get(label, {}).get(target) for key in means)] for target in targets]
        tables[label] = Table(["Domain", "AP50", *ERROR_METRICS.values()], body, range(1, 2 + len(ERROR_METRICS)),
                              title=f"Errors by type, {label}: ΔAP50 if fixed (AP points)")
    return tables


def uouo_table(rows: Sequence[AnyRow]) -> Table:
    """Models against mIoU and quadrant accuracy on ``mmd`` and ``random`` mosaics (fractions)."""
    rows = as_rows(rows)
    labels = column_labels(rows)
    value = {(label, row.data.dataset, key): _value(row, key)
             for label, row in zip(labels, rows) for key in ("miou", "accuracy")}
    body = [[label, *(value.get((label, dataset, key)) for _, dataset, key in UOUO_COLUMNS)]
            for label in dict.fromkeys(labels)]
    return Table(["Model", *(name for name, _, _ in UOUO_COLUMNS)], body, range(1, 1 + len(UOUO_COLUMNS)),
                 digits=4, title="UOUO: mIoU and quadrant accuracy (as in its Table 1)")


def summary_tables(rows: Sequence[AnyRow]) -> list[Table]:
    """The headline table of each benchmark among ``rows``, as the summary prints them: RF100-VL's
    AP50:95 by dataset and domain (Table 2's layout), UOUO's Table 1; for destinations that take
    tables rather than markdown (experiment trackers)."""
    rows = as_rows(rows)
    detection = [row for row in rows if row.data.benchmark == "rf100vl"]
    grounding = [row for row in rows if row.data.benchmark == "uouo"]
    return ([ap_table(detection)] if detection else []) + ([uouo_table(grounding)] if grounding else [])
