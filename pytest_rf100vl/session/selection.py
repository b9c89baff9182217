"""Which (model, dataset) pairs a session runs.

A dataset named with ``--rf100vl-dataset`` belongs to the benchmark kind that claims it (a
typo is a usage error listing the closest names of every kind); each kind may select more
datasets through its own options (RF100-VL: a domain, a subset). Whether a dataset is *on
disk* is checked when its pairs run, so a partial local copy still runs what it has.
"""

from __future__ import annotations

import pytest

from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.kinds.base import BenchmarkKind


def kind_of(dataset: str, kinds: list[BenchmarkKind]) -> BenchmarkKind:
    """The kind that claims ``dataset``; an unknown name is a usage error with suggestions."""
    from rf100vl_hf.rf100vl.catalog import unknown

    for kind in kinds:
        if kind.claims(dataset):
            return kind
    known = [name for kind in kinds for name in kind.known_datasets()]
    raise pytest.UsageError(f"--rf100vl-dataset: {unknown('dataset', dataset, known)}")


def matrix(config: RunConfig, kinds: list[BenchmarkKind]) -> list[Pair]:
    """Every pair, model-major (so each model's datasets run one after another): the named
    datasets first, then those the kinds' own options select; one pair per seed of its kind
    (:meth:`BenchmarkKind.seeds`)."""
    if not config.active:
        return []
    chosen = {name: kind_of(name, kinds).name for name in config.matrix.datasets}
    for kind in kinds:
        for name in kind.selected():
            chosen.setdefault(name, kind.name)
    seeds = {kind.name: kind.seeds() for kind in kinds}
    return [Pair(spec, dataset, kind, seed)
            for spec in config.matrix.models for dataset, kind in chosen.items() for seed in seeds[kind]]
