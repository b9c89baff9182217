"""Adapters by name: a table of built-ins with lazy ``"module:Class"`` entries, plus the
``rf100vl.adapters`` entry-point group for third-party models, so adding a model touches
one file (or one line of another package's ``pyproject.toml``)."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from rf100vl_hf.rf100vl.catalog import unknown

from pytest_rf100vl.adapters.base import Adapter

ENTRY_POINT_GROUP = "rf100vl.adapters"

BUILTIN: dict[str, str] = {
    "oracle": "pytest_rf100vl.adapters.oracle:OracleAdapter",
    "predictions": "pytest_rf100vl.adapters.replay:ReplayAdapter",
}


def available() -> dict[str, str]:
    """Name -> ``module:Class`` of every adapter, built-in and installed."""
    table = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        table.setdefault(ep.name, ep.value)
    return table


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``NAME[:CHECKPOINT_OR_PATH]``; only the first colon separates, so paths and hub ids pass."""
    name, _, checkpoint = spec.partition(":")
    return name.strip(), (checkpoint.strip() or None)


def adapter_class(name: str) -> type[Adapter]:
    table = available()
    if name not in table:
        raise unknown("model adapter", name, sorted(table))
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def create(spec: str, device: str = "cpu", dtype: str = "float32", **options: Any) -> Adapter:
    """Build the adapter a spec names, e.g. ``owlv2``, ``owlv2:google/owlv2-large-patch14-ensemble``."""
    name, checkpoint = parse_spec(spec)
    return adapter_class(name)(checkpoint, device=device, dtype=dtype, **options)
