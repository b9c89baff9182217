"""Which (model, dataset) pairs a session runs.

A dataset named with ``--rf100vl-dataset`` belongs to the benchmark kind that claims it (a
typo is a usage error listing the closest names of every kind), or a kind names a group of
datasets by one value (RF100-VL: ``all``, ``rf20vl``, ``domain:NAME``). Whether a dataset is *on
disk* is checked when its pairs run, so a partial local copy still runs what it has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from rf100vl_hf.errors import unknown
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.core.training_plan import plan
from pytest_rf100vl.kinds.base import BenchmarkKind

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Entry

EVERY = "all"
"""The datasets a run with a model and no ``--rf100vl-dataset`` runs: the group a kind names ``all``."""


def kind_of(dataset: str, kinds: list[BenchmarkKind]) -> BenchmarkKind:
    """The kind that claims ``dataset``; an unknown name is a usage error with suggestions."""
    for kind in kinds:
        if kind.claims(dataset):
            return kind
    known = [name for kind in kinds for name in kind.datasets()]
    raise pytest.UsageError(f"--rf100vl-dataset: {unknown('dataset', dataset, known)}")


def _pairs(config: RunConfig, spec: ModelSpec, dataset: str, kind: BenchmarkKind,
           entry_of: "Callable[[ModelSpec], Entry | None]") -> list[Pair]:
    """The pairs of one model and dataset: one, or one per seed when the model is fine-tuned
    first, each carrying its training plan (or why it has none)."""
    training = config.training
    if not (kind.trains and training.split is not None):
        return [Pair(spec, dataset, kind.name)]
    entry = entry_of(spec)
    pairs = []
    for seed in training.seeds or (0,):
        made, why = None, None
        if entry is not None and entry.recipes:  # a model without recipes is left out when it loads
            try:
                made = plan(entry, training.split, training.recipe, dict(training.options), seed)
            except ValueError as exc:
                why = str(exc)
        pairs.append(Pair(spec, dataset, kind.name, seed, made, why))
    return pairs


def matrix(config: RunConfig, kinds: list[BenchmarkKind],
           entry_of: "Callable[[ModelSpec], Entry | None]") -> list[Pair]:
    """Every pair, model-major (so each model's datasets run one after another): the datasets
    named, in order, a group (``all``, ``domain:NAME``) as its kind lists it, and ``all`` when
    none is named; with ``--rf100vl-train``, one
    pair per seed for a kind whose splits give training data. ``entry_of`` resolves a
    model's registry entry (``None`` when it cannot: its pairs then fail when the model loads)."""
    if not config.active:
        return []
    by_name = {kind.name: kind for kind in kinds}
    chosen: dict[str, str] = {}
    for value in config.matrix.datasets or (EVERY,):
        for kind in kinds:
            if (names := kind.group(value)) is not None:
                chosen.update({name: kind.name for name in names if name not in chosen})
                break
        else:
            chosen.setdefault(value, kind_of(value, kinds).name)
    return [pair for spec in config.matrix.models for dataset, kind in chosen.items()
            for pair in _pairs(config, spec, dataset, by_name[kind], entry_of)]
