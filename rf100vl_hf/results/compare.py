"""Two results folders compared: the AP difference (B - A, in AP points) on each dataset both
scored, and on each domain mean and ``All``, with percentile bootstrap confidence intervals.

- A dataset's interval resamples its images: each resample draws as many images as the split
  has, with replacement, and both folders' predictions are scored on the same draw
  (:mod:`rf100vl_hf.metrics.resample`: exactly pycocotools on the resampled images), so the
  interval is that of a paired difference.
- A mean's interval resamples the datasets of the mean (the domain's, or all of them) with
  replacement; a mean over one dataset has none.

Draws are seeded by ``seed`` and the dataset's (or domain's) name, so an interval does not
change with the other datasets compared. :data:`RESAMPLES` draws by default.

The change in each TIDE error type's ΔAP50 (``docs/errors.md``) comes beside it, from the
rows' columns: per domain mean and ``All``, with the same interval over resampled datasets
(the rows hold no per-image errors to resample images with); a type is left out when a row
of either side lacks it.

A significance statement comes with it (:func:`rf100vl_hf.metrics.seeds.significance`):
Welch's t-test over seeds when both sides fine-tuned with several seeds (their rows of a
dataset differ only by ``seed``; the bootstrap then uses each side's lowest seed), else the
Wilcoxon signed-rank test over the datasets compared.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rf100vl_hf.controls import one_line
from rf100vl_hf.errors import DataError
from rf100vl_hf.progress import progress_bar
from rf100vl_hf.results.defaults import CONFIDENCE, RESAMPLES
from rf100vl_hf.results.predictions import located_rows, row_matches, row_split
from rf100vl_hf.results.schema import ResultRow
from rf100vl_hf.results.tables import ERROR_METRICS, Table, _domain, _value, column_labels, over_seeds

COMPARABLE = ("split", "dataset_fingerprint", "split_parameters", "limit")
"""Data columns two rows of a dataset must share to have been scored on the same images."""


@dataclass(frozen=True)
class Difference:
    """B - A on one dataset (``images`` its images) or one mean (``datasets`` it covers), in AP
    points, with the interval's bounds (``None`` for a mean over one dataset)."""

    name: str
    domain: str
    ap_a: float
    ap_b: float
    difference: float
    low: float | None
    high: float | None
    images: int | None = None
    datasets: int | None = None


@dataclass(frozen=True)
class Comparison:
    """What ``results compare`` prints."""

    a: str
    b: str
    datasets: list[Difference]
    means: list[Difference]
    skipped: dict[str, str] = field(default_factory=dict)  # dataset -> why it was not compared
    significance: str | None = None  # the test's statement (its method named)
    errors: dict[str, list[Difference]] = field(default_factory=dict)  # TIDE column -> its means' differences
    resamples: int = RESAMPLES
    confidence: float = CONFIDENCE
    seed: int = 0


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    low, high = np.quantile(values, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def _side(folder: Path, model: str | None, option: str) -> tuple[Path, dict[str, list[ResultRow]]]:
    """A folder's rows by dataset (of ``model`` when given: a spec or an adapter name), lowest
    seed first; a dataset's rows may differ only by seed."""

    root, rows = located_rows(folder)
    if not rows:
        raise DataError(folder, "rows", "no RF100-VL rows to compare (UOUO rows are not compared)")
    if model is not None:
        chosen = [row for row in rows if model in (row.model.spec, row.model.model)]
        if not chosen:
            models = ", ".join(dict.fromkeys(str(row.model.spec) for row in rows)) or "none"
            raise DataError(folder, option, f"no RF100-VL rows of model {model!r} (models: {models})")
        rows = chosen
    by_dataset: dict[str, list[ResultRow]] = {}
    for row in rows:
        by_dataset.setdefault(str(row.data.dataset), []).append(row)
    for dataset, several in by_dataset.items():
        if len(over_seeds(several)) > 1:
            raise DataError(folder, f"rows of {dataset}", f"{len(several)} of them ({', '.join(column_labels(several))}"
                            f"): choose one model with {option}, or compare folders holding one row per dataset")
        several.sort(key=lambda row: (row.training.seed is None, row.training.seed or 0))
    return root, by_dataset


def _label(folder: Path, rows: dict[str, ResultRow]) -> str:
    specs = ", ".join(dict.fromkeys(row.spec for row in rows.values()))
    return f"{folder} ({specs})" if specs else str(folder)


def _not_comparable(a: ResultRow, b: ResultRow) -> str | None:
    differ = [f"{key} {getattr(a.data, key)} vs {getattr(b.data, key)}" for key in COMPARABLE
              if getattr(a.data, key) != getattr(b.data, key)]
    if differ:
        return "scored on different images: " + "; ".join(differ)
    if a.protocol != b.protocol:
        return f"scored under different protocols: {a.protocol} vs {b.protocol}"
    if not all(isinstance(row.scores.ap, (int, float)) for row in (a, b)):
        return "AP is undefined (the split has no ground-truth box)"
    for side, row in (("A", a), ("B", b)):
        if not math.isfinite(row.scores.ap):
            return f"AP of {side} is not a number ({row.scores.ap})"
    return None


def compare(
    folder_a: Path,
    folder_b: Path,
    model_a: str | None = None,
    model_b: str | None = None,
    data_dir: Path | None = None,
    fewshot_dir: Path | None = None,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    progress: bool = True,
) -> Comparison:
    """Compare the RF100-VL rows of two results folders dataset by dataset (see module docs).
    The datasets are read from ``data_dir`` (the exports the rows were scored on) and each
    row's predictions must still give its AP."""
    from rf100vl_hf.metrics.aggregate import ORDER

    if resamples < 1 or not 0 < confidence <= 1:
        raise ValueError(f"need at least one resample and a confidence in (0, 1], got {resamples}, {confidence}")
    from rf100vl_hf.metrics.seeds import significance

    root_a, seeded_a = _side(folder_a, model_a, "--option model-a")
    root_b, seeded_b = _side(folder_b, model_b, "--option model-b")
    rows_a = {name: rows[0] for name, rows in seeded_a.items()}
    rows_b = {name: rows[0] for name, rows in seeded_b.items()}
    skipped = {name: f"only in {which}" for which, mine, other in (("A", rows_a, rows_b), ("B", rows_b, rows_a))
               for name in mine if name not in other}
    common = [name for name in rows_a if name in rows_b]
    for name in common:
        reason = _not_comparable(rows_a[name], rows_b[name])
        if reason:
            skipped[name] = reason
    compared = sorted((name for name in common if name not in skipped),
                      key=lambda name: (ORDER.index(_domain(rows_a[name])), name))  # as Table 2 orders them
    differences = []
    with progress_bar(total=len(compared) * resamples, desc="bootstrap over images", disable=not progress) as bar:
        for name in compared:
            differences.append(_dataset_difference(rows_a[name], root_a, rows_b[name], root_b, data_dir, fewshot_dir,
                                                   resamples, confidence, seed, bar.update))
    tested = significance([row.to_dict() for name in compared for row in seeded_b[name]],
                          [row.to_dict() for name in compared for row in seeded_a[name]], "B", "A")
    errors = {}
    for key in ERROR_METRICS:
        values = [(rows_a[name], _value(rows_a[name], key), _value(rows_b[name], key)) for name in compared]
        if values and all(a is not None and b is not None for _, a, b in values):
            per_dataset = [Difference(row.data.dataset, _domain(row), a, b, b - a, None, None)
                           for row, a, b in values]
            errors[key] = _mean_differences(per_dataset, resamples, confidence, seed)
    return Comparison(_label(folder_a, rows_a), _label(folder_b, rows_b), differences,
                      _mean_differences(differences, resamples, confidence, seed), skipped, tested.statement,
                      errors, resamples, confidence, seed)


def _dataset_difference(
    a: ResultRow, root_a: Path, b: ResultRow, root_b: Path, data_dir: Path | None,
    fewshot_dir: Path | None, resamples: int, confidence: float, seed: int, advance: Callable[[int], Any],
) -> Difference:
    """B - A on one dataset, with its interval over resampled images (the same draws for both)."""
    split = row_split(a, data_dir, fewshot_dir)
    matches_a, matches_b = row_matches(a, root_a, split), row_matches(b, root_b, split)
    images = len(matches_a.image_ids)
    draws = _rng(seed, a.data.dataset).integers(0, images, size=(resamples, images))
    resampled = np.empty(resamples)
    for index, draw in enumerate(draws):
        counts = np.bincount(draw, minlength=images)
        resampled[index] = 100 * (matches_b.ap(counts) - matches_a.ap(counts))
        advance(1)
    ap_a, ap_b = 100 * matches_a.ap(), 100 * matches_b.ap()
    low, high = _interval(resampled, confidence)
    return Difference(a.data.dataset, _domain(a), ap_a, ap_b, ap_b - ap_a, low, high, images=images)


def _mean_differences(differences: Sequence[Difference], resamples: int, confidence: float,
                      seed: int) -> list[Difference]:
    """Per domain (in the paper's order) and ``All``: the mean difference, with its interval over
    resampled datasets."""
    from rf100vl_hf.metrics.aggregate import ALL, ORDER

    groups = {domain: [d for d in differences if d.domain == domain] for domain in ORDER}
    groups = {domain: members for domain, members in groups.items() if members}
    if differences:
        groups[ALL] = list(differences)
    means = []
    for target, members in groups.items():
        values = np.array([d.difference for d in members])
        low = high = None
        if len(members) > 1:
            picks = _rng(seed, target).integers(0, len(members), size=(resamples, len(members)))
            low, high = _interval(values[picks].mean(axis=1), confidence)
        means.append(Difference(target, target, float(np.mean([d.ap_a for d in members])),
                                float(np.mean([d.ap_b for d in members])), float(values.mean()), low, high,
                                datasets=len(members)))
    return means


def comparison_table(comparison: Comparison) -> Table:
    """Datasets, then the domain means and ``All``: AP of A and B, B - A and its interval."""
    percent = round(100 * comparison.confidence)
    header = ["Dataset", "Domain", "n", "AP A", "AP B", "B - A", f"{percent}% CI low", f"{percent}% CI high"]
    body: list[list[Any]] = [
        [d.name, d.domain, d.images, d.ap_a, d.ap_b, d.difference, d.low, d.high] for d in comparison.datasets
    ]
    first_mean = len(body)
    body += [[m.name, "mean", m.datasets, m.ap_a, m.ap_b, m.difference, m.low, m.high] for m in comparison.means]
    return Table(header, body, range(3, len(header)), digits=2, emphasis=set(range(first_mean, len(body))),
                 title="AP50:95 difference (B - A, AP points)")


def errors_table(comparison: Comparison) -> Table:
    """Each TIDE error type's ΔAP50 (AP points) of A and B per domain mean and ``All``, B - A and
    its interval over resampled datasets; no rows when the rows carry no TIDE columns."""
    percent = round(100 * comparison.confidence)
    header = ["Error type", "Domain", "n", "ΔAP50 A", "ΔAP50 B", "B - A", f"{percent}% CI low", f"{percent}% CI high"]
    body = [[ERROR_METRICS[key], m.name, m.datasets, m.ap_a, m.ap_b, m.difference, m.low, m.high]
            for key, means in comparison.errors.items() for m in means]
    return Table(header, body, range(3, len(header)), digits=2,
                 title="Errors by type: change in ΔAP50 (B - A, AP points; less is fewer errors)")


def notes(comparison: Comparison) -> list[str]:
    """What the table's reader must know: the two sides, the method, and what was left out (as
    single lines whose control characters are escaped: specs and names come from the rows)."""

    percent = round(100 * comparison.confidence)
    lines = [f"A: {comparison.a}", f"B: {comparison.b}",
             f"{percent}% percentile bootstrap intervals, {comparison.resamples} resamples (seed {comparison.seed}): "
             "over images for a dataset (paired), over datasets for a mean; n is the images of a dataset, the "
             "datasets of a mean"]
    if comparison.significance:
        lines.append(f"significance: {comparison.significance}")
    lines += [f"not compared: {name}: {why}" for name, why in comparison.skipped.items()]
    return [one_line(line) for line in lines]

