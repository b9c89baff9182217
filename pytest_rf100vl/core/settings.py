"""What every room of the plugin reads of the user's request: an option's definition and the
validated settings. The option tables themselves, and reading them from pytest, are
``collect/options.py``'s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

DEFAULT_RESULTS = Path(".rf100vl") / "results"
AUTO_BATCH = "auto"
"""``--rf100vl-batch-size auto``: the largest batch that fits on the GPU (``engine/batch_size.py``)."""


@dataclass(frozen=True)
class Option:
    """One option.

    ``kind`` is ``list`` (repeatable, comma-separated when ``split``), ``str``, ``int``,
    ``float``, ``path`` or ``flag`` (on when given; ini ``true``/``false``). ``choices`` limits a ``str``; ``minimum`` bounds a number; ``check``
    may refuse any other value by raising ``ValueError`` with the reason.
    """

    name: str
    kind: str
    help: str
    metavar: str
    split: bool = False
    prefix: str = "rf100vl"
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    check: Callable[[Any], Any] | None = None

    @property
    def flag(self) -> str:
        return f"--{self.prefix}-{self.name}"

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` and its ini key."""
        return f"{self.prefix}_{self.name.replace('-', '_')}"

    def parse(self, raw: Any) -> Any:
        """The typed, checked value of a raw command-line or ini value (``None``: the default)."""
        if self.kind != "list" and raw is None:
            return self.default
        value: Any = _items(raw, self.split) if self.kind == "list" else raw
        if self.kind in ("int", "float"):
            try:
                value = int(raw) if self.kind == "int" else float(raw)
            except ValueError:
                raise pytest.UsageError(f"{self.flag}: expected a number, got {raw!r}") from None
            if self.minimum is not None and value < self.minimum:
                raise pytest.UsageError(f"{self.flag}: must be at least {self.minimum:g}, got {value}")
        if self.choices and value not in self.choices:
            raise pytest.UsageError(f"{self.flag}: {value!r} is not one of {', '.join(self.choices)}")
        if self.check is not None:
            try:
                value = self.check(value)
            except ValueError as exc:
                raise pytest.UsageError(f"{self.flag}: {exc}") from None
        return value


@dataclass(frozen=True)
class AdapterOption:
    """``--rf100vl-adapter-option [NAME.]KEY=VALUE``; ``adapter`` is ``None`` for every model."""

    adapter: str | None
    key: str
    value: str


@dataclass(frozen=True)
class Settings:
    """What the user asked for, validated. ``values`` holds every option's parsed value by its
    ``dest`` (benchmark kinds read theirs from it); the core ones are also attributes.
    ``active`` when a model, a dataset or a kind's selection option is set."""

    models: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    device: str = "auto"
    dtype: str = "float32"
    batch_size: int | str = 1  # or "auto"
    results: Path = DEFAULT_RESULTS
    thresholds: Path | None = None
    adapter_options: tuple[AdapterOption, ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    selecting: bool = False  # a kind's own selection option (a domain, a subset) was given
    adapter_defaults: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Adapter name -> options the kinds' settings give it by default (a protocol's NMS or
    threshold): any ``--rf100vl-adapter-option`` overrides them."""

    @property
    def active(self) -> bool:
        return bool(self.models or self.datasets or self.selecting)

    def value(self, dest: str) -> Any:
        """The parsed value of the option whose ``dest`` (ini key) is ``dest``."""
        return self.values[dest]

    def options_for(self, spec: str) -> dict[str, str]:
        """The adapter options of model ``spec``: the kinds' defaults for its adapter, then the
        options given for every model, then those given for its name."""
        name = spec.partition(":")[0].strip()
        general = {o.key: o.value for o in self.adapter_options if o.adapter is None}
        return {**self.adapter_defaults.get(name, {}), **general,
                **{o.key: o.value for o in self.adapter_options if o.adapter == name}}


def _items(values: list[str] | None, split: bool) -> tuple[str, ...]:
    out: list[str] = []
    for value in values or []:
        parts = value.split(",") if split else [value]
        out.extend(p.strip() for p in parts if p.strip())
    return tuple(dict.fromkeys(out))
