"""Which categories, cut-outs and target a mosaic gets (the choice half of the spec in ``docs/uouo.md``).

- ``random``: four distinct categories drawn uniformly; the first drawn is the anchor.
- ``mmd``: an anchor drawn uniformly, and its three nearest categories by MMD.

Either way the anchor is the target of both questions, the four categories are shuffled
over the four cells, each cell gets one of its category's cut-outs drawn uniformly, and
the MMD^2 of each other category to the anchor is recorded (so random and hard mosaics
can be compared on the same scale). Each mosaic has its own generator,
``numpy.random.default_rng([seed, index])``: mosaic ``i`` does not depend on how many
come before it, and the same generator then draws the mosaic's augmentations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rf100vl_hf.uouo.defaults import MODES

if TYPE_CHECKING:  # computing neighbours needs torch; planning a mosaic only reads them
    from rf100vl_hf.uouo.mmd import CategoryNeighbours

__all__ = ["MODES", "MosaicPlan", "mosaic_rng", "plan_mosaic"]


@dataclass(frozen=True)
class MosaicPlan:
    categories: list[int]  # per cell, indices into the source's categories
    items: list[int]  # per cell, index of the cut-out within its category
    target: int  # the cell of the anchor
    mmd2_to_target: list[float]  # per cell; 0.0 for the target itself


def mosaic_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index])


def plan_mosaic(
    mode: str,
    rng: np.random.Generator,
    sizes: list[int],
    neighbours: CategoryNeighbours,
) -> MosaicPlan:
    """Draw one mosaic's plan; ``sizes`` is the number of cut-outs of each category."""
    if mode == "random":
        anchor, *others = (int(c) for c in rng.choice(len(sizes), size=4, replace=False))
    elif mode == "mmd":
        anchor = int(rng.integers(len(sizes)))
        others = [int(c) for c in neighbours.neighbours[anchor][:3]]
    else:
        raise ValueError(f"unknown mosaic mode {mode!r}; one of {', '.join(MODES)}")
    chosen = [anchor, *others]
    distances = [0.0, *neighbours.mmd2(anchor, others)]
    cells = [int(c) for c in rng.permutation(4)]  # cells[j] is the cell of chosen[j]
    by_cell = sorted(range(4), key=lambda j: cells[j])
    return MosaicPlan(
        categories=[chosen[j] for j in by_cell],
        items=[int(rng.integers(sizes[chosen[j]])) for j in by_cell],
        target=cells[0],
        mmd2_to_target=[distances[j] for j in by_cell],
    )
