"""Training-time augmentation shared by the recipes that ask for it: horizontal flips and
multi-scale square resizing, the two that every real-time DETR's authors train with (RT-DETR,
D-FINE, DEIMv2, LW-DETR, RF-DETR).

Each batch is resized to one square side drawn from the multiples of the model's size divisor
(its patch and window grid, or its largest stride) between ``min_scale`` and ``max_scale`` times
its resolution, as the authors' collate functions do per batch; the last
``single_scale_epochs`` epochs resize every batch to the resolution itself (flips go on), as
D-FINE's and DEIMv2's schedules stop multi-scale training before the end. A multi-scale batch
is therefore always square, of the side the model is then given
(:attr:`Augmentation.sides` non-empty). Boxes follow the pixels: a flip mirrors
them, a resize scales them, so :func:`~rf100vl_hf.training.samples.normalized_targets` is the
same before and after a resize.

Draws come from torch's global generator, which the training loop seeds from the recipe's seed
and the epoch, so an augmented epoch is the same whether a fit ran through or resumed; an
augmentation that does nothing draws nothing, so recipes without one train exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.samples import Sample


def square_sides(resolution: int, min_scale: float, max_scale: float, divisor: int) -> tuple[int, ...]:
    """The multiples of ``divisor`` from ``min_scale * resolution`` to ``max_scale * resolution``
    (both included); ``()`` when the range is the resolution alone (nothing to draw). A range
    that holds no multiple is a ``ValueError`` saying which."""
    if min_scale == max_scale == 1:
        return ()
    low, high = min_scale * resolution, max_scale * resolution
    sides = tuple(side for side in range(divisor, int(high) + 1, divisor) if low <= side <= high)
    if not sides:
        raise ValueError(f"no multiple of {divisor} lies between {low:g} and {high:g} ({min_scale:g} to "
                         f"{max_scale:g} times the resolution {resolution}): widen min_scale/max_scale")
    return sides


def flipped(sample: "Sample") -> "Sample":
    """``sample`` mirrored left to right, its boxes with it."""
    boxes = np.asarray(sample.boxes, dtype=np.float64).reshape(-1, 4).copy()
    width = sample.image.width
    boxes[:, [0, 2]] = width - boxes[:, [2, 0]]
    return replace(sample, image=sample.image.transpose(Image.Transpose.FLIP_LEFT_RIGHT), boxes=boxes)


def resized(sample: "Sample", side: int) -> "Sample":
    """``sample`` resized to ``side`` x ``side`` (bilinear, as the authors resize), its boxes scaled."""
    width, height = sample.image.size
    scale = np.array([side / width, side / height] * 2)
    boxes = np.asarray(sample.boxes, dtype=np.float64).reshape(-1, 4) * scale
    return replace(sample, image=sample.image.resize((side, side), Image.Resampling.BILINEAR), boxes=boxes)


@dataclass(frozen=True)
class Augmentation:
    """What a recipe does to each training batch (see the module docstring)."""

    flip: float = 0.0
    sides: tuple[int, ...] = ()
    resolution: int = 0
    epochs: int = 0
    single_scale_epochs: int = 0

    @classmethod
    def of(cls, recipe: "Recipe", resolution: int | None, divisor: int) -> "Augmentation":
        """The recipe's augmentation for a model that sees ``resolution`` x ``resolution`` images
        (``None``: a model without one square size, which cannot be trained multi-scale)."""
        if resolution is None:
            if (recipe.min_scale, recipe.max_scale) != (1, 1):
                raise ValueError(f"recipe {recipe.name!r}: min_scale/max_scale resize around the model's square "
                                 "resolution, and this checkpoint's processor has none: set both to 1")
            return cls(recipe.flip)
        sides = square_sides(resolution, recipe.min_scale, recipe.max_scale, divisor)
        return cls(recipe.flip, sides, resolution, recipe.epochs, recipe.single_scale_epochs)

    @property
    def active(self) -> bool:
        return self.flip > 0 or bool(self.sides)

    def __call__(self, batch: list["Sample"], epoch: int) -> list["Sample"]:
        """``batch`` as epoch ``epoch`` (from 1) trains on it."""
        import torch

        if self.flip > 0:
            turns = torch.rand(len(batch)) < self.flip
            batch = [flipped(sample) if turn else sample for sample, turn in zip(batch, turns.tolist())]
        if self.sides:
            multi_scale = epoch <= self.epochs - self.single_scale_epochs
            side = self.sides[int(torch.randint(len(self.sides), ()))] if multi_scale else self.resolution
            batch = [resized(sample, side) for sample in batch]
        return batch
