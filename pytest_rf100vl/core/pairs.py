"""One test of the matrix, and how to find it on a collected item."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from rf100vl_hf.results.schema import ResultRow
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.core.training_plan import TrainingPlan


@dataclass(frozen=True)
class Pair:
    """One test of the matrix: a model, a dataset name and the dataset's benchmark kind;
    ``seed`` for a pair that fits the model first (the training key ``seeds``: one pair per seed).
    ``spec`` is the model as asked for (its text names the model in ids and rows)."""

    spec: ModelSpec
    dataset: str
    kind: str
    seed: int | None = None
    training: TrainingPlan | None = field(default=None, compare=False)
    """How the model is fine-tuned first (``None``: scored as it comes)."""
    unplanned: str | None = field(default=None, compare=False)
    """Why no training plan could be made for a pair that asks for one (it then errors)."""

    @property
    def id(self) -> str:
        return f"{self.spec}-{self.dataset}" + ("" if self.seed is None else f"-seed{self.seed}")

    @property
    def key(self) -> tuple[str, str, int | None]:
        """What tells this pair's row from others of the run (:func:`row_key`)."""
        return self.spec.text, self.dataset, self.seed


def row_key(row: ResultRow) -> tuple[Any, Any, Any]:
    """The :attr:`Pair.key` of the pair that wrote ``row``: its seed is the training seed of a
    fine-tuned pair (a UOUO row's ``seed`` column is its mosaics' seed, no pair's)."""
    training = row.training
    return row.model.spec, row.data.dataset, training.seed if training is not None and training.train_split else None


def pair_of(item: pytest.Item) -> Pair | None:
    """The pair a collected test is parametrized with (``None`` for any other test)."""
    callspec: Any = getattr(item, "callspec", None)
    return callspec.params.get("rf100vl_pair") if callspec is not None else None
