"""Figures of results rows, as PNG files drawn with matplotlib (Agg: no display needed).

- ``domain_means.png``: grouped bars, one group per domain (and ``All``), one bar per model;
- ``heatmap.png``: datasets against models, the metric in each cell;
- ``per_class_<dataset>.png``: each class's AP on one dataset, one bar per model (a heat-map
  of classes against models past :data:`MAX_GROUPED_MODELS` models, where bars get too thin);
- ``errors_by_type.png``: per model, a bar per domain (and ``All``) stacked by TIDE's ΔAP50 of
  each error type (``docs/errors.md``);
- ``confusion_<model>_<dataset>.png``: a pair's confusion matrix (its ``confusion_file``), each
  row coloured by its share of the true class, counts written in the cells.

Models are named as in the tables (display names, smoke models marked, and then the title
says what the mark means), each in a colour of its own in every figure (:func:`model_colours`:
up to 60 distinct colours, so no two models share one). Every figure has a title; legends sit outside the axes, so they
never cover a bar; figures are saved with their bounding box fitted to what is drawn, so no
tick label is cut, however long a dataset or model name.

Figures are matplotlib ``Figure`` objects, not pyplot's: pyplot keeps global state, and
results pushed from several threads at once draw at the same time; one lock serialises the
drawing as well, as matplotlib's text rendering is not safe across threads.
"""

from __future__ import annotations

import csv
import logging
import math
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rf100vl_hf.errors import needs_extra
from rf100vl_hf.results.folder import model_folder
from rf100vl_hf.results.schema import AnyRow, ResultRow, as_rows
from rf100vl_hf.results.tables import (
    ERROR_METRICS,
    METRICS,
    SMOKE_MARK,
    SMOKE_NOTE,
    ap_table,
    column_labels,
    domain_scores,
    error_tables,
    per_class_tables,
)

log = logging.getLogger("rf100vl_hf")

DOMAIN_MEANS = "domain_means.png"
HEATMAP = "heatmap.png"
ERRORS_BY_TYPE = "errors_by_type.png"
LIGHT_CELLS = 60.0
"""Heatmap values above this are drawn on light colours of the map, so their text is black."""
MAX_GROUPED_MODELS = 6
"""Past this many models, the per-class figure is a heat-map: grouped bars would be too thin to read."""
QUALITATIVE_MAPS = ("tab20", "tab20b", "tab20c")
"""Where models take their colours: tab20's ten dark colours (tab10's), its ten light ones, then tab20b's and
tab20c's: 60 colours, the first ten the most distinct."""
ERROR_COLOURS = {"tide_cls": "#E69F00", "tide_loc": "#56B4E9", "tide_both": "#009E73", "tide_dupe": "#F0E442",
                 "tide_bkg": "#D55E00", "tide_miss": "#CC79A7"}
"""The six TIDE error types in Okabe and Ito's colours (told apart with any colour vision)."""


_DRAWING = threading.Lock()


@contextmanager
def _figure(width: float, height: float, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """A new figure (inches) and its axes (``Figure.subplots``' arguments), drawn by one thread at a time."""
    with needs_extra("drawing results"):
        from matplotlib.figure import Figure

    with _DRAWING:
        figure = Figure(figsize=(width, height))
        yield figure, figure.subplots(**subplots)


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


def model_colours(models: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """A colour per model, in order, distinct up to 60 models (:data:`QUALITATIVE_MAPS`; matplotlib's
    default cycle repeats from the eleventh)."""
    from matplotlib import colormaps

    first = colormaps[QUALITATIVE_MAPS[0]].colors
    palette = [*first[0::2], *first[1::2], *(c for name in QUALITATIVE_MAPS[1:] for c in colormaps[name].colors)]
    return {model: tuple(palette[i % len(palette)]) for i, model in enumerate(dict.fromkeys(models))}


def _heat(figure: Any, axes: Any, values: np.ndarray, columns: Sequence[str], rows: Sequence[str], label: str,
          text: np.ndarray | None = None, vmax: float = 100.0) -> None:
    """A heat-map of ``values`` (rows x columns, NaN blank), each cell's number written in it (or
    ``text``'s), with a colour bar named ``label``."""
    image = axes.imshow(np.ma.masked_invalid(values), aspect="auto", cmap="viridis", vmin=0, vmax=vmax)
    axes.set_xticks(range(len(columns)), columns, rotation=30 if len(columns) < 12 else 90,
                    ha="right" if len(columns) < 12 else "center")
    axes.set_yticks(range(len(rows)), rows)
    shown = values if text is None else text
    for (r, c), value in np.ndenumerate(values):
        if math.isfinite(value) and (text is None or shown[r, c]):
            axes.text(c, r, f"{shown[r, c]:.1f}" if text is None else f"{int(shown[r, c])}", ha="center",
                      va="center", fontsize="x-small", color="black" if value > LIGHT_CELLS * vmax / 100 else "white")
    figure.colorbar(image, ax=axes, label=label)


def domain_means_plot(rows: Sequence[AnyRow], path: Path, metric: str = "ap") -> Path:
    means = domain_scores(rows, metric)
    targets = list(dict.fromkeys(t for by_target in means.values() for t in by_target))
    width = 0.8 / max(1, len(means))
    with _figure(max(6.0, 1.2 * len(targets) + 2), 4) as (figure, axes):
        colours = model_colours(list(means))
        for i, (column, by_target) in enumerate(means.items()):
            axes.bar([t + i * width for t in range(len(targets))], [by_target.get(t, math.nan) for t in targets],
                     width, label=column, color=colours[column])
        axes.set_xticks([t + width * (len(means) - 1) / 2 for t in range(len(targets))], targets, rotation=30,
                        ha="right")
        axes.set_ylabel(f"{METRICS[metric]} (%)")
        axes.set_ylim(0, 100)
        _title(axes, f"RF100-VL: {METRICS[metric]} (%) per domain, and over all datasets", list(means))
        if means:
            _legend(axes)
        return _save(figure, path)


def heatmap_plot(rows: Sequence[AnyRow], path: Path, metric: str = "ap") -> Path:
    table = ap_table(rows, metric)
    datasets = [row for i, row in enumerate(table.rows) if i not in table.emphasis]
    columns = table.header[2:]
    values = np.array([[_number(v) for v in row[2:]] for row in datasets], dtype=float).reshape(len(datasets), -1)
    with _figure(max(4.0, 1.4 * len(columns) + 3), max(3.0, 0.35 * len(datasets) + 1.5)) as (figure, axes):
        _heat(figure, axes, values, columns, [row[0] for row in datasets], f"{METRICS[metric]} (%)")
        _title(axes, f"RF100-VL: {METRICS[metric]} (%) per dataset", columns)
        return _save(figure, path)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def per_class_file(dataset: str) -> str:
    return f"per_class_{_slug(dataset)}.png"


def per_class_plot(rows: Sequence[AnyRow], dataset: str, path: Path, metric: str = "ap") -> Path:
    tables = per_class_tables([row for row in as_rows(rows) if row.data.dataset == dataset], metric)
    if not tables:
        raise ValueError(f"no per-class results for dataset {dataset!r}")
    table = tables[0]
    columns = table.header[2:]
    classes = [row[0] for row in table.rows]
    title = f"{dataset}: {METRICS[metric]} (%) per class"
    if len(columns) > MAX_GROUPED_MODELS:
        values = np.array([[_number(v) for v in row[2:]] for row in table.rows], dtype=float).reshape(len(classes), -1)
        with _figure(max(5.0, 0.9 * len(columns) + 3), max(3.0, 0.35 * len(classes) + 2)) as (figure, axes):
            _heat(figure, axes, values, columns, classes, f"{METRICS[metric]} (%)")
            _title(axes, title, columns)
            return _save(figure, path)
    width = 0.8 / max(1, len(columns))
    with _figure(max(6.0, 0.5 * len(classes) * max(1, len(columns)) + 2), 4) as (figure, axes):
        colours = model_colours(columns)
        for i, column in enumerate(columns):
            axes.bar([k + i * width for k in range(len(classes))], [_number(row[2 + i]) for row in table.rows],
                     width, label=column, color=colours[column])
        axes.set_xticks([k + width * (len(columns) - 1) / 2 for k in range(len(classes))], classes, rotation=45,
                        ha="right")
        axes.set_ylabel(f"{METRICS[metric]} (%)")
        axes.set_ylim(0, 100)
        _title(axes, title, columns)
        _legend(axes)
        return _save(figure, path)


def errors_plot(rows: Sequence[AnyRow], path: Path) -> Path | None:
    """Per model with TIDE columns, a horizontal bar per domain (and ``All``) stacked by the ΔAP50
    of each of the six error types; ``None`` when no row has them."""
    tables = error_tables(rows)
    if not tables:
        return None
    keys = list(ERROR_METRICS)[:6]  # the oracles overlap the types: they are the tables' last columns
    bars = sum(len(table.rows) for table in tables.values())
    heights = {"height_ratios": [len(table.rows) for table in tables.values()]}
    with _figure(9.0, 1.2 + 0.32 * bars + 0.5 * len(tables), nrows=len(tables), sharex=True, squeeze=False,
                 gridspec_kw=heights) as (figure, grid):
        panels, models = grid[:, 0], list(tables)
        for axes, (model, table) in zip(panels, tables.items()):
            domains = [row[0] for row in table.rows]
            left = np.zeros(len(domains))
            for key in keys:
                values = np.nan_to_num([_number(row[table.header.index(ERROR_METRICS[key])]) for row in table.rows])
                axes.barh(range(len(domains)), values, left=left, color=ERROR_COLOURS[key], label=ERROR_METRICS[key])
                left += values
            axes.set_yticks(range(len(domains)), domains)
            axes.invert_yaxis()
            axes.set_ylabel(model, rotation=0, ha="right", va="center", fontweight="bold")
        panels[-1].set_xlabel("ΔAP50 if the errors of a type were fixed (AP points), stacked")
        panels[0].legend(title="error type", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                         borderaxespad=0.0)
        _title(panels[0], "RF100-VL: errors by type (TIDE) per model and domain", models)
        return _save(figure, path)


def confusion_file_name(row: ResultRow) -> str:
    return f"confusion_{model_folder(row.spec)}_{_slug(row.data.dataset)}.png"


def confusion_plot(csv_path: Path, path: Path, title: str) -> Path:
    """A confusion matrix CSV (``docs/errors.md``) as a heat-map: true classes down, predicted
    across, background last on both; colour is the share of the true class's row, the count is
    written in each non-empty cell. Cells stay legible at 25 classes and more (the figure grows)."""
    with Path(csv_path).open(encoding="utf-8", newline="") as handle:
        header, *lines = list(csv.reader(handle))
    labels = header[1:]
    counts = np.array([[int(cell) for cell in line[1:]] for line in lines], dtype=float)
    totals = counts.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(totals > 0, 100 * counts / totals, np.nan)
    side = max(5.0, 0.42 * len(labels) + 3)
    with _figure(side + 1.5, side) as (figure, axes):
        _heat(figure, axes, share, labels, [line[0] for line in lines], "share of the true class's row (%)",
              text=counts)
        axes.set_xlabel("predicted")
        axes.set_ylabel("true")
        axes.set_title(f"{title}\nconfusion at IoU 0.5 (background: detections matching nothing, boxes never found)")
        return _save(figure, path)


def confusion_plots(rows: Sequence[ResultRow], out: Path) -> list[Path]:
    """A confusion heat-map per row whose confusion matrix file is there (a missing one is logged)."""
    paths = []
    for row, label in zip(rows, column_labels(rows)):
        named = None if row.errors is None else row.errors.confusion_file
        if not named:
            continue
        if not Path(named).is_file():
            log.warning("no confusion heat-map of %s on %s: %s is missing", label, row.data.dataset, named)
            continue
        paths.append(confusion_plot(Path(named), out / confusion_file_name(row), f"{label} on {row.data.dataset}"))
    return paths


def write_plots(rows: Sequence[AnyRow], out: Path, metric: str = "ap", dataset: str | None = None,
                confusion: bool = True) -> list[Path]:
    """The figures of the RF100-VL rows in ``out``: domain means, heatmap, errors by type (rows
    with TIDE columns), per-class AP of ``dataset`` (default: the first dataset with per-class
    results, if any) and, with ``confusion``, each pair's confusion heat-map."""
    out = Path(out)
    detection = [row for row in as_rows(rows) if row.data.benchmark == "rf100vl"]
    if not detection:
        return []
    paths = [domain_means_plot(detection, out / DOMAIN_MEANS, metric), heatmap_plot(detection, out / HEATMAP, metric)]
    errors = errors_plot(detection, out / ERRORS_BY_TYPE)
    paths += [errors] if errors is not None else []
    with_classes = [row.data.dataset for row in detection if row.scores.per_class]
    if dataset is None and with_classes:
        dataset = with_classes[0]
    if dataset is not None:
        paths.append(per_class_plot(detection, dataset, out / per_class_file(dataset), "ap50" if metric == "ap50" else "ap"))
    return paths + (confusion_plots(detection, out) if confusion else [])
