"""The figures as a reader sees them: a title on each, models by their display names, smoke
models marked and explained, legends beside the data, and nothing cut at the image's edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.results.plots import write_plots

from tests.results.factory import detection_row

PER_CLASS = "fish-market-ggjso"


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    """Two models, one long-named and one a replay of a smoke run, on three datasets."""
    specs = {"owlv2:google/owlv2-base-patch16-ensemble": False, "predictions:/runs/2025-05-01/oracle": True}
    return [detection_row(spec, dataset, 20.0 + 30 * i, smoke=smoke)
            for spec, smoke in specs.items() for i, dataset in enumerate(["bees", "actions", PER_CLASS])]


@pytest.fixture
def figures(rows, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """File name -> the matplotlib figure saved there."""
    from matplotlib.figure import Figure

    saved: dict[str, Any] = {}
    save = Figure.savefig

    def recording(self: Any, path: Any, *args: Any, **kwargs: Any) -> None:
        saved[Path(path).name] = self
        save(self, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording)
    paths = write_plots(rows, tmp_path, dataset=PER_CLASS)
    assert sorted(p.name for p in paths) == sorted(saved) == [
        "domain_means.png", "heatmap.png", f"per_class_{PER_CLASS}.png"]
    return {name: (figure, tmp_path / name) for name, figure in saved.items()}


def test_every_figure_has_a_title_explaining_the_smoke_mark(figures) -> None:
    for name, (figure, _) in figures.items():
        title = figure.axes[0].get_title()
        assert title.startswith(("RF100-VL: AP50:95 (%)", f"{PER_CLASS}: AP50:95 (%) per class")), name
        assert title.endswith("(smoke): random weights, scores mean nothing"), name


def test_models_are_shown_by_display_names(figures) -> None:
    heatmap = figures["heatmap.png"][0].axes[0]
    assert [t.get_text() for t in heatmap.get_xticklabels()] == [
        "owlv2:google/owlv2-base-patch16-ensemble", "replay(oracle) (smoke)"]
    legend = figures["domain_means.png"][0].axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["owlv2:google/owlv2-base-patch16-ensemble",
                                                          "replay(oracle) (smoke)"]


def test_legends_sit_beside_the_data(figures) -> None:
    for name in ("domain_means.png", f"per_class_{PER_CLASS}.png"):
        figure = figures[name][0]
        figure.canvas.draw()
        axes = figure.axes[0]
        assert axes.get_legend().get_window_extent().x0 >= axes.get_window_extent().x1, name


def test_nothing_is_cut_at_the_edges_of_an_image(figures) -> None:
    band = 4  # pixels: a label cut by the image's edge inks them (anti-aliasing may spare the very first)
    for name, (_, path) in figures.items():
        pixels = np.asarray(Image.open(path).convert("RGB")).min(axis=2)
        edges = np.concatenate([pixels[:band].ravel(), pixels[-band:].ravel(), pixels[:, :band].ravel(),
                                pixels[:, -band:].ravel()])
        assert edges.min() > 250, f"{name}: something is drawn across the image's edge"
