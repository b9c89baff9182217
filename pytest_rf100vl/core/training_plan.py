"""A pair's training plan (the README's "Data regimes"): with ``--rf100vl-train SPLIT`` each
pair of a benchmark whose splits give training data fits its model on that split first, by
the adapter's recipe for the regime (or the training key ``recipe``), with ``--rf100vl-train-option``
overrides and the pair's seed. The plan is worked out once, when the matrix is made, and
carried on the pair; fitting it is the session's training stage (``session/training.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rf100vl_hf.training.recipe import Recipe, regime_of


@dataclass(frozen=True)
class TrainingPlan:
    """How a pair fine-tunes its model before it is scored."""

    split: str
    recipe: Recipe

    @property
    def regime(self) -> str:
        return regime_of(self.split)


def plan(entry: Any, split: str, recipe_name: str | None, options: dict[str, str], seed: int | None) -> TrainingPlan:
    """The training plan of a pair of a model of registry ``entry`` (its ``name``, ``recipes``,
    ``default_recipes``, ``recipe_fields``); ``ValueError`` when it cannot be trained, or has
    no such recipe or hyper-parameter."""
    regime = regime_of(split)
    if not entry.recipes:
        raise ValueError(f"adapter {entry.name!r} cannot be fine-tuned (it has no recipe)")
    name = recipe_name or entry.default_recipes.get(regime)
    if name not in entry.recipes:
        raise ValueError(f"adapter {entry.name!r} has no recipe {name!r} for the {regime} regime "
                         f"(recipes: {', '.join(entry.recipes)}; choose one with -o rf100vl_recipe=NAME)")
    recipe = entry.recipes[name].with_options(options)
    used = entry.recipe_fields
    unused = sorted(key for key in options if used is not None and key not in used
                    and key != "seed" and key not in recipe.extra)
    if unused:
        uses = sorted({*used, *recipe.extra})
        raise ValueError(f"adapter {entry.name!r} trains with its own library's trainer, which has no "
                         f"{', '.join(unused)} (its recipe {name!r} sets: {', '.join(uses)})")
    return TrainingPlan(split, replace(recipe, seed=recipe.seed if seed is None else seed))
