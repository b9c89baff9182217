"""Options declared once, as fields of the typed sections of a run's configuration.

Each field made by :func:`option` is a command-line option ``--PREFIX-NAME``, its ini key
``PREFIX_NAME`` and its key in a ``--rf100vl-config`` file; :class:`Option` parses and checks
a raw value into the field's type, so a bad value is one usage error naming the option,
wherever it was given. Model: lm-eval's ``config/evaluate_config.py`` (a dataclass of the
run, filled from the command line or a file).

Example: a section with one option::

    @dataclass(frozen=True)
    class ToyOptions:
        objects: str = option("objects", "str", "what the toy benchmark counts", "NAME", prefix="toy",
                              default="squares")

gives ``--toy-objects NAME``, the ini key ``toy_objects`` and ``toy: {objects: ...}`` in a file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

OPTION = "rf100vl_option"
"""The dataclass field metadata key holding a field's :class:`Option`."""


@dataclass(frozen=True)
class Option:
    """One option.

    ``kind`` is ``list`` (repeatable, comma-separated when ``split``), ``str``, ``int``,
    ``float``, ``path`` or ``flag`` (on when given; ini ``true``/``false``). ``choices`` limits a
    ``str``; ``minimum`` bounds a number; ``check`` may refuse any other value by raising
    ``ValueError`` with the reason, or convert it (``--rf100vl-shard 1/4`` becomes ``(1, 4)``).
    ``selects``: the option selects datasets by itself (a domain), so it turns the matrix on.
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
    selects: bool = False
    show: Callable[[Any], str] = str
    """The text of a parsed value, as the command line writes it (``(1, 4)`` is ``1/4``)."""

    @property
    def flag(self) -> str:
        return f"--{self.prefix}-{self.name}"

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` and its ini key."""
        return f"{self.prefix}_{self.name.replace('-', '_')}"

    def parse(self, raw: Any) -> Any:
        """The typed, checked value of a raw command-line, ini or file value (``None``: the default)."""
        if self.kind != "list" and raw is None:
            return self.default
        value: Any = _items(raw, self.split) if self.kind == "list" else raw
        if self.kind == "flag" and not isinstance(raw, bool):
            raise pytest.UsageError(f"{self.flag}: expected true or false, got {raw!r}")
        if self.kind in ("int", "float"):
            try:
                if isinstance(raw, bool) or (self.kind == "int" and isinstance(raw, float)):
                    raise ValueError
                value = int(raw) if self.kind == "int" else float(raw)
            except (TypeError, ValueError):
                raise pytest.UsageError(f"{self.flag}: expected a number, got {raw!r}") from None
            if self.minimum is not None and value < self.minimum:
                raise pytest.UsageError(f"{self.flag}: must be at least {self.minimum:g}, got {value}")
        if self.kind in ("str", "path"):
            value = _text(self, raw)
        if self.choices and value not in self.choices:
            raise pytest.UsageError(f"{self.flag}: {value!r} is not one of {', '.join(self.choices)}")
        if self.check is not None:
            try:
                value = self.check(value)
            except ValueError as exc:
                raise pytest.UsageError(f"{self.flag}: {exc}") from None
        return value


    def as_args(self, value: Any) -> list[str]:
        """The command-line arguments that give ``value`` (none for the default)."""
        if value == self.default or value is None:
            return []
        if self.kind == "flag":
            return [self.flag] if value else []
        if self.kind == "list":
            items = [f"{key}={text}" for key, text in value.items()] if isinstance(value, Mapping) else value
            return [f"{self.flag}={self.show(item)}" for item in items]
        return [f"{self.flag}={self.show(value)}"]


def option(name: str, kind: str, help: str, metavar: str = "", **settings: Any) -> Any:
    """A dataclass field that is also an option (the field's default is the option's: a list
    option's is the empty tuple, a flag's ``False``)."""
    declared = Option(name, kind, help, metavar, **settings)
    default = () if kind == "list" else (False if kind == "flag" and declared.default is None else declared.default)
    return dataclasses.field(default=default, metadata={OPTION: dataclasses.replace(declared, default=default)})


def fields_with_options(section: type) -> Iterator[tuple[str, Option]]:
    """Each (field name, option) of a section dataclass, in declaration order."""
    for item in dataclasses.fields(section):
        if OPTION in item.metadata:
            yield item.name, item.metadata[OPTION]


def options_of(section: type) -> tuple[Option, ...]:
    return tuple(declared for _, declared in fields_with_options(section))


def _text(declared: Option, raw: Any) -> Any:
    """A text or path option's value: numbers a config file gives (``batch_size: 8``) as text."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return str(raw)
    if not isinstance(raw, str) and not hasattr(raw, "__fspath__"):
        raise pytest.UsageError(f"{declared.flag}: expected text, got {raw!r}")
    return raw


def _items(values: Any, split: bool) -> tuple[str, ...]:
    """A list option's items: each given value, cut at commas when ``split``; each once, in order."""
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values or []:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise pytest.UsageError(f"expected text items, got {value!r}")
        parts = str(value).split(",") if split else [str(value)]
        out.extend(p.strip() for p in parts if p.strip())
    return tuple(dict.fromkeys(out))
