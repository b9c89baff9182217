"""Adapters by name: a table of built-ins with lazy ``"module:Class"`` entries, plus the
``rf100vl.adapters`` entry-point group for third-party models, so adding a model touches
one file (or one line of another package's ``pyproject.toml``)."""

from __future__ import annotations

import importlib
from functools import reduce
from importlib.metadata import entry_points
from typing import Any

from rf100vl_hf.rf100vl.catalog import unknown

from pytest_rf100vl.adapters.base import Adapter

ENTRY_POINT_GROUP = "rf100vl.adapters"

BUILTIN: dict[str, str] = {
    "owlv2": "pytest_rf100vl.adapters.owl:Owlv2Adapter",
    "owlvit": "pytest_rf100vl.adapters.owl:OwlVitAdapter",
    "grounding-dino": "pytest_rf100vl.adapters.grounding_dino:GroundingDinoAdapter",
    "mm-grounding-dino": "pytest_rf100vl.adapters.grounding_dino:MMGroundingDinoAdapter",
    "omdet-turbo": "pytest_rf100vl.adapters.omdet:OmDetTurboAdapter",
    "florence-2": "pytest_rf100vl.adapters.florence2:Florence2Adapter",
    "qwen2.5-vl": "pytest_rf100vl.adapters.qwen_vl:Qwen25VLAdapter",
    "qwen3-vl": "pytest_rf100vl.adapters.qwen_vl:Qwen3VLAdapter",
    "paligemma": "pytest_rf100vl.adapters.paligemma:PaliGemmaAdapter",
    "clip-quadrant": "pytest_rf100vl.adapters.clip_quadrant:ClipQuadrantAdapter",
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
    """The class registered under ``name``, imported on first use (heavy model code loads lazily)."""
    table = available()
    if name not in table:
        raise unknown("model adapter", name, sorted(table))
    module, _, attr = table[name].partition(":")
    cls = reduce(getattr, attr.split("."), importlib.import_module(module))
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise TypeError(f"model adapter {name!r} points at {table[name]}, which is not an Adapter subclass")
    return cls


def create(spec: str, device: str = "cpu", dtype: str = "float32", **options: Any) -> Adapter:
    """Build the adapter a spec names, e.g. ``owlv2``, ``owlv2:google/owlv2-large-patch14-ensemble``."""
    name, checkpoint = parse_spec(spec)
    return adapter_class(name)(checkpoint, device=device, dtype=dtype, **options)
