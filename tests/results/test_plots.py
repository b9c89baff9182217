"""The figures as a reader sees them: a title on each, models by their display names, smoke
models marked and explained, legends beside the data, and nothing cut at the image's edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.results.plots import write_plots

from tests.results.factory import detection_row, error_columns

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


ELEVEN = ["oracle", "owlv2:tiny", "owlv2", "gdino", "florence2", "qwen25vl", "gemini", "yolo", "rfdetr", "dfine",
          "omdet"]


@pytest.fixture(scope="module")
def eleven(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Eleven models with TIDE columns on three datasets, one pair with a 25-class confusion
    matrix file; and the figures written of them, by file name."""
    from matplotlib.figure import Figure

    tmp_path = tmp_path_factory.mktemp("eleven")
    classes = [f"class-{k}" for k in range(25)] + ["background"]
    counts = np.random.default_rng(0).poisson(0.4, (26, 26)) + np.diag([20] * 25 + [0])
    matrix = tmp_path / "test.confusion.csv"
    matrix.write_text("\n".join([",".join(["truth \\ predicted", *classes]), *(
        ",".join([name, *map(str, line)]) for name, line in zip(classes, counts.tolist()))]) + "\n", encoding="utf-8")
    rows = [detection_row(spec, dataset, 10.0 + i + j, **error_columns(1.0 + (i + j) % 3))
            for i, spec in enumerate(ELEVEN) for j, dataset in enumerate(["bees", "actions", PER_CLASS])]
    rows[0]["confusion_file"] = str(matrix)
    saved: dict[str, Any] = {}
    save = Figure.savefig

    def recording(self: Any, path: Any, *args: Any, **kwargs: Any) -> None:
        saved[Path(path).name] = self
        save(self, path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", recording)
        write_plots(rows, tmp_path / "plots", dataset=PER_CLASS)
    return rows, {"counts": counts, **saved}


def test_eleven_models_get_eleven_colours_and_a_readable_per_class_figure(eleven) -> None:
    _, figures = eleven
    bars = figures["domain_means.png"].axes[0].containers
    colours = [tuple(container.patches[0].get_facecolor()) for container in bars]
    assert len(bars) == 11 and len(set(colours)) == 11  # matplotlib's cycle gave oracle owlv2:tiny's blue
    per_class = figures[f"per_class_{PER_CLASS}.png"].axes[0]
    assert not per_class.containers and per_class.images  # a heat-map: eleven bars per class are too thin
    assert [t.get_text() for t in per_class.get_xticklabels()] == ELEVEN
    assert len(per_class.texts) == 11  # one class with a score (the factory's other has none): every cell written


def test_errors_by_type_stack_the_six_types_per_model_and_domain(eleven) -> None:
    rows, figures = eleven
    panels = figures["errors_by_type.png"].axes
    assert [axes.get_ylabel() for axes in panels] == ELEVEN
    legend = panels[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["Cls", "Loc", "Both", "Dupe", "Bkg", "Miss"]
    oracle = panels[0]
    assert [t.get_text() for t in oracle.get_yticklabels()] == ["Flora & Fauna", "Sports", "All"]
    sports = [container.patches[1] for container in oracle.containers]  # oracle on actions: ΔAP 2, 3, ... 7
    assert [patch.get_width() for patch in sports] == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert sports[-1].get_x() + sports[-1].get_width() == sum(range(2, 8))


def test_a_confusion_heat_map_is_legible_at_25_classes(eleven) -> None:
    _, figures = eleven
    figure = figures["confusion_oracle_bees.png"]
    axes = figure.axes[0]
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels == [f"class-{k}" for k in range(25)] + ["background"]
    assert [t.get_text() for t in axes.get_yticklabels()] == labels
    written = {(round(t.get_position()[1]), round(t.get_position()[0])): int(t.get_text()) for t in axes.texts}
    counts = figures["counts"]
    assert written == {(r, c): int(counts[r, c]) for r, c in zip(*np.nonzero(counts))}
    figure.canvas.draw()
    heights = [t.get_window_extent().height for t in axes.get_yticklabels()]
    spacing = abs(axes.transData.transform((0, 1))[1] - axes.transData.transform((0, 0))[1])
    assert max(heights) < spacing  # no two class names overlap
