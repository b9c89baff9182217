"""The curation's report: the UOUO paper's Appendix A statistics and the classifier's scores, each
beside the paper's figures (``docs/uouo.md``, "Curation")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rf100vl_hf.markdown import table
from rf100vl_hf.uouo.classifier import PAPER_SCORES, PERCENTILE_RULE, Scores

if TYPE_CHECKING:
    from rf100vl_hf.uouo.rawimages import RawCollection
    from rf100vl_hf.uouo.remover import Remover

PAPER_APPENDIX_A = {"categories_in": 27_926, "images_in": 956_167, "kept_categories": 25_864,
                    "kept_images": 678_535, "mean": 26.235, "minimum": 5, "maximum": 48}
"""UOUO Appendix A: the collection before and after curation."""


@dataclass(frozen=True)
class Statistics:
    """Appendix A's figures of one curation (kept: categories with enough cut-outs, and their cut-outs)."""

    categories_in: int
    images_in: int
    kept_categories: int
    kept_images: int
    mean: float
    minimum: int
    maximum: int

    @classmethod
    def of(cls, collection: RawCollection, kept: dict[str, int], images_in: int) -> Statistics:
        counts = list(kept.values())
        return cls(len(collection.images), images_in, len(counts), sum(counts),
                   sum(counts) / len(counts) if counts else 0.0, min(counts, default=0), max(counts, default=0))


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def appendix_table(stats: Statistics) -> list[str]:
    """Appendix A as a markdown table: this run beside the paper."""
    paper = PAPER_APPENDIX_A
    rows = [
        ["categories in", f"{stats.categories_in:,}", f"{paper['categories_in']:,}"],
        ["images in", f"{stats.images_in:,}", f"{paper['images_in']:,}"],
        ["categories kept", f"{stats.kept_categories:,} ({_percent(stats.kept_categories, stats.categories_in)})",
         f"{paper['kept_categories']:,} ({_percent(paper['kept_categories'], paper['categories_in'])})"],
        ["images kept", f"{stats.kept_images:,} ({_percent(stats.kept_images, stats.images_in)})",
         f"{paper['kept_images']:,} ({_percent(paper['kept_images'], paper['images_in'])})"],
        ["images per kept category: average", f"{stats.mean:.3f}", f"{paper['mean']:.3f}"],
        ["images per kept category: minimum", str(stats.minimum), str(paper["minimum"])],
        ["images per kept category: maximum", str(stats.maximum), str(paper["maximum"])],
    ]
    return table(["", "this curation", "UOUO paper (Appendix A)"], rows)


def scores_table(scores: Scores) -> list[str]:
    """The classifier's cross-validated scores beside the paper's."""
    rows = [[name if name == "accuracy" else f"macro {name}", f"{getattr(scores, name):.4f}", f"{paper:.4f}"]
            for name, paper in PAPER_SCORES.items()]
    return table(["score", f"this classifier ({scores.labelled} labels, 5-fold CV)", "UOUO paper (§3)"], rows)


def write_report(path: Path, stats: Statistics | None, scores: Scores | None, remover: Remover | None,
                 drops: dict[str, int], percentile_rule: float | None, clip_model: str,
                 clip_pretrained: str | None) -> Path:
    """``report.md``: the two tables, what was dropped where, and how (model, remover, licence)."""
    lines = ["# UOUO curation report", "", f"CLIP features: open_clip `{clip_model}` with "
             f"`{clip_pretrained or 'none (seeded random weights: a smoke run)'}`.", ""]
    if stats is not None:
        lines += ["## Appendix A statistics", "", *appendix_table(stats), ""]
    lines += ["## Classifier", ""]
    if scores is not None:
        lines += [*scores_table(scores), "", f"Chosen parameters: `{scores.params}`; {scores.good} of "
                  f"{scores.labelled} labels are good.", ""]
    elif percentile_rule is not None:
        lines += [f"Percentile rule ({PERCENTILE_RULE}): images below the {percentile_rule:g}th percentile of "
                  "average similarity in their category were dropped.", ""]
    else:
        lines += ["A saved classifier was applied (its scores are in its `classifier-meta.json`).", ""]
    if drops:
        lines += ["## Dropped images by stage", "", *table(["stage", "images"], sorted(
            [stage, str(count)] for stage, count in drops.items())), ""]
    if remover is not None:
        licence = f"`{remover.licence}`" + (f": {remover.licence_note}" if remover.licence_note else "")
        lines += ["## Background removal", "", f"Remover `{remover.name}` (rembg session `{remover.session}`), "
                  f"licence {licence}.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
