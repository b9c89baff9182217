"""Figures of results rows, as PNG files drawn with matplotlib (Agg: no display needed).

- ``domain_means.png``: grouped bars, one group per domain (and ``All``), one bar per model;
- ``heatmap.png``: datasets against models, the metric in each cell;
- ``per_class_<dataset>.png``: each class's AP on one dataset, one bar per model.

Models are named as in the tables (display names, smoke models marked, and then the title
says what the mark means). Every figure has a title; legends sit outside the axes, so they
never cover a bar; figures are saved with their bounding box fitted to what is drawn, so no
tick label is cut, however long a dataset or model name.

Figures are matplotlib ``Figure`` objects, not pyplot's: pyplot keeps global state, and
results pushed from several threads at once draw at the same time; one lock serialises the
drawing as well, as matplotlib's text rendering is not safe across threads.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rf100vl_hf.errors import needs_extra
from rf100vl_hf.results.tables import METRICS, SMOKE_MARK, SMOKE_NOTE, ap_table, domain_scores, per_class_tables

DOMAIN_MEANS = "domain_means.png"
HEATMAP = "heatmap.png"
LIGHT_CELLS = 60.0
"""Heatmap values above this are drawn on light colours of the map, so their text is black."""


_DRAWING = threading.Lock()


@contextmanager
def _figure(width: float, height: float) -> Iterator[tuple[Any, Any]]:
    """A new figure (inches) and its axes, drawn by one thread at a time."""
    with needs_extra("drawing results"):
        from matplotlib.figure import Figure

    with _DRAWING:
        figure = Figure(figsize=(width, height))
        yield figure, figure.subplots()


def _save(figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")  # fitted to the drawing: long labels and the legend stay in
    return path


def _title(axes: Any, title: str, models: Sequence[str]) -> None:
    """The figure's title, and what the smoke mark means when a model carries it."""
    smoke = any(model.endswith(SMOKE_MARK) for model in models)
    axes.set_title(title + (f"\n{SMOKE_NOTE}" if smoke else ""))


def _legend(axes: Any) -> None:
    """The models' legend, outside the axes on the right, so that it covers no data."""
    axes.legend(title="model", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def domain_means_plot(rows: Sequence[dict[str, Any]], path: Path, metric: str = "ap") -> Path:
    means = domain_scores(rows, metric)
    targets = list(dict.fromkeys(t for by_target in means.values() for t in by_target))
    width = 0.8 / max(1, len(means))
    with _figure(max(6.0, 1.2 * len(targets) + 2), 4) as (figure, axes):
        for i, (column, by_target) in enumerate(means.items()):
            axes.bar([t + i * width for t in range(len(targets))], [by_target.get(t, math.nan) for t in targets],
                     width, label=column)
        axes.set_xticks([t + width * (len(means) - 1) / 2 for t in range(len(targets))], targets, rotation=30,
                        ha="right")
        axes.set_ylabel(f"{METRICS[metric]} (%)")
        axes.set_ylim(0, 100)
        _title(axes, f"RF100-VL: {METRICS[metric]} (%) per domain, and over all datasets", list(means))
        if means:
            _legend(axes)
        return _save(figure, path)


def heatmap_plot(rows: Sequence[dict[str, Any]], path: Path, metric: str = "ap") -> Path:
    table = ap_table(rows, metric)
    datasets = [row for i, row in enumerate(table.rows) if i not in table.emphasis]
    columns = table.header[2:]
    values = np.array([[_number(v) for v in row[2:]] for row in datasets], dtype=float).reshape(len(datasets), -1)
    with _figure(max(4.0, 1.4 * len(columns) + 3), max(3.0, 0.35 * len(datasets) + 1.5)) as (figure, axes):
        image = axes.imshow(np.ma.masked_invalid(values), aspect="auto", cmap="viridis", vmin=0, vmax=100)
        axes.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
        axes.set_yticks(range(len(datasets)), [row[0] for row in datasets])
        for (r, c), value in np.ndenumerate(values):
            if math.isfinite(value):
                axes.text(c, r, f"{value:.1f}", ha="center", va="center", fontsize="x-small",
                          color="black" if value > LIGHT_CELLS else "white")
        figure.colorbar(image, ax=axes, label=f"{METRICS[metric]} (%)")
        _title(axes, f"RF100-VL: {METRICS[metric]} (%) per dataset", columns)
        return _save(figure, path)


def per_class_file(dataset: str) -> str:
    return f"per_class_{re.sub(r'[^A-Za-z0-9._-]+', '_', dataset)}.png"


def per_class_plot(rows: Sequence[dict[str, Any]], dataset: str, path: Path, metric: str = "ap") -> Path:
    tables = per_class_tables([r for r in rows if r.get("dataset") == dataset], metric)
    if not tables:
        raise ValueError(f"no per-class results for dataset {dataset!r}")
    table = tables[0]
    columns = table.header[2:]
    classes = [row[0] for row in table.rows]
    width = 0.8 / max(1, len(columns))
    with _figure(max(6.0, 0.5 * len(classes) * max(1, len(columns)) + 2), 4) as (figure, axes):
        for i, column in enumerate(columns):
            axes.bar([k + i * width for k in range(len(classes))], [_number(row[2 + i]) for row in table.rows],
                     width, label=column)
        axes.set_xticks([k + width * (len(columns) - 1) / 2 for k in range(len(classes))], classes, rotation=45,
                        ha="right")
        axes.set_ylabel(f"{METRICS[metric]} (%)")
        axes.set_ylim(0, 100)
        _title(axes, f"{dataset}: {METRICS[metric]} (%) per class", columns)
        _legend(axes)
        return _save(figure, path)


def write_plots(rows: Sequence[dict[str, Any]], out: Path, metric: str = "ap", dataset: str | None = None) -> list[Path]:
    """The figures of the RF100-VL rows in ``out``: domain means, heatmap, and per-class AP of
    ``dataset`` (default: the first dataset with per-class results, if any)."""
    out = Path(out)
    detection = [row for row in rows if row.get("benchmark") == "rf100vl"]
    if not detection:
        return []
    paths = [domain_means_plot(detection, out / DOMAIN_MEANS, metric), heatmap_plot(detection, out / HEATMAP, metric)]
    with_classes = [row["dataset"] for row in detection if row.get("per_class")]
    if dataset is None and with_classes:
        dataset = with_classes[0]
    if dataset is not None:
        paths.append(per_class_plot(detection, dataset, out / per_class_file(dataset), "ap50" if metric == "ap50" else "ap"))
    return paths
