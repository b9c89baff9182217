"""Which (model, dataset) pairs a session runs, from the names, domains and subset asked for.

Names are checked when the session starts (a typo is a usage error listing the closest
names); whether a dataset is *on disk* is checked when its pairs run, so a partial local
copy of RF100-VL still runs what it has and skips the rest with the "how to get it" text.
The UOUO datasets (:data:`UOUO_DATASETS`) are named like any other and built from the
cut-out source when their pairs run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_rf100vl.options import Settings

RF100VL, UOUO = "rf100vl", "uouo"
"""The benchmarks a dataset belongs to, as adapters name them in ``Adapter.tasks``."""
UOUO_DATASETS = ("uouo-random", "uouo-mmd")
"""``uouo-<config>`` for each config of the ``uouo`` builder (:data:`rf100vl_hf.uouo.plan.MODES`)."""


@dataclass(frozen=True)
class Pair:
    """One test of the matrix: an adapter spec and a dataset name."""

    model: str
    dataset: str

    @property
    def id(self) -> str:
        return f"{self.model}-{self.dataset}"

    @property
    def kind(self) -> str:
        """The benchmark of the dataset: :data:`UOUO` or :data:`RF100VL`."""
        return UOUO if uouo_config(self.dataset) else RF100VL


def uouo_config(dataset: str) -> str | None:
    """The ``uouo`` builder config a dataset name stands for; ``None`` for RF100-VL datasets."""
    return dataset.removeprefix("uouo-") if dataset in UOUO_DATASETS else None


def _data_dir(settings: Settings) -> Path:
    from rf100vl_hf import paths

    return settings.data_dir or paths.default_data_dir()


def _check_name(name: str, data_dir: Path) -> None:
    from rf100vl_hf.rf100vl import catalog, sources

    builtin = (*UOUO_DATASETS, sources.SAMPLE_NAME)
    if name in builtin or catalog.contains(name) or name in sources.custom_exports(data_dir):
        return
    known = [e.basename for e in catalog.entries()] + sources.custom_exports(data_dir) + list(builtin)
    raise pytest.UsageError(f"--rf100vl-dataset: {catalog.unknown('dataset', name, known)}")


def select_datasets(settings: Settings) -> list[str]:
    """Named datasets first, then those of the domains and subset, in catalogue order.

    With models but no dataset, domain or subset, every RF100-VL dataset is selected.
    """
    from rf100vl_hf.errors import UnknownNameError
    from rf100vl_hf.rf100vl import catalog, sources

    data_dir = _data_dir(settings)
    for name in settings.datasets:
        _check_name(name, data_dir)
    names = list(settings.datasets)
    subset = settings.subset or "all"
    if settings.domains or settings.subset or not settings.datasets:
        try:
            domains = [catalog.normalize_domain(d) for d in settings.domains] or [None]
        except UnknownNameError as exc:
            raise pytest.UsageError(f"--rf100vl-domain: {exc}") from None
        for domain in domains:
            if domain == catalog.CUSTOM_DOMAIN:
                names.extend(sources.custom_exports(data_dir))
            else:
                names.extend(e.basename for e in catalog.select(domain, subset))
    return list(dict.fromkeys(names))


def matrix(settings: Settings) -> list[Pair]:
    """Every pair, model-major, so each model's datasets run one after another."""
    if not settings.active:
        return []
    datasets = select_datasets(settings)
    return [Pair(model, dataset) for model in settings.models for dataset in datasets]
