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
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf.errors import shown

OPTION = "rf100vl_option"
"""The dataclass field metadata key holding a field's :class:`Option`."""


@dataclass(frozen=True)
class Option:
    """One option.

    ``kind`` is ``list`` (repeatable, comma-separated when ``split``), ``str``, ``int``,
    ``float`` (finite), ``path`` or ``flag`` (on when given; ini ``true``/``false``); empty text
    is refused, as an unset shell variable gives it (``--rf100vl-results=$OUT``). ``choices``
    limits a ``str``; ``keywords`` are words a ``path`` takes as themselves (``off``);
    ``minimum`` bounds a number; ``check`` may refuse any other value by raising ``ValueError``
    with the reason, or convert it (``--rf100vl-shard 1/4`` becomes ``(1, 4)``). ``selects``:
    the option selects datasets by itself (a domain), so it turns the matrix on.
    """

    name: str
    kind: str
    help: str
    metavar: str
    split: bool = False
    prefix: str = "rf100vl"
    default: Any = None
    choices: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
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
        value: Any = _items(self, raw) if self.kind == "list" else raw
        if self.kind == "flag" and not isinstance(raw, bool):
            raise pytest.UsageError(f"{self.flag}: expected true or false, got {shown(raw)}")
        if self.kind in ("int", "float"):
            try:
                if isinstance(raw, bool) or (self.kind == "int" and isinstance(raw, float)):
                    raise ValueError
                value = int(raw) if self.kind == "int" else float(raw)
            except (TypeError, ValueError):
                raise pytest.UsageError(f"{self.flag}: expected a number, got {shown(raw)}") from None
            if not math.isfinite(value):
                raise pytest.UsageError(f"{self.flag}: expected a finite number, got {value}")
            if self.minimum is not None and value < self.minimum:
                raise pytest.UsageError(f"{self.flag}: must be at least {self.minimum:g}, got {value}")
        if self.kind in ("str", "path"):
            value = _text(self, raw)
        if self.kind == "path" and value not in self.keywords:
            value = Path(value)
        if self.choices and value not in self.choices:
            raise pytest.UsageError(f"{self.flag}: {shown(value)} is not one of {', '.join(self.choices)}")
        if self.check is not None:
            try:
                value = self.check(value)
            except ValueError as exc:
                raise pytest.UsageError(f"{self.flag}: {exc}") from None
        return value

    def relative_to(self, folder: Path, raw: Any) -> Any:
        """A raw ``path`` value resolved against ``folder`` (where pytest started, or the folder
        of the config or ini file that gave it); another kind's value, a keyword, empty text or
        a value other than text as given, for :meth:`parse` to take or refuse."""
        if self.kind != "path" or not isinstance(raw, str) or not raw.strip() or _keyword(self, raw) is not None:
            return raw
        return folder / Path(raw).expanduser()

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


def _keyword(declared: Option, raw: str) -> str | None:
    """The keyword of ``declared`` that ``raw`` is (any case, spaces around), else ``None``."""
    word = raw.strip().lower()
    return word if word in declared.keywords else None


def _text(declared: Option, raw: Any) -> Any:
    """A text or path option's value: numbers a config file gives (``batch_size: 8``) as text;
    empty text refused; a keyword as the word."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return str(raw)
    if not isinstance(raw, str) and not hasattr(raw, "__fspath__"):
        raise pytest.UsageError(f"{declared.flag}: expected text, got {shown(raw)}")
    if isinstance(raw, str):
        if not raw.strip():
            raise pytest.UsageError(f"{declared.flag}: empty: give a value or leave the option out")
        return _keyword(declared, raw) or raw
    return raw


def _items(declared: Option, values: Any) -> tuple[str, ...]:
    """A list option's items: each given value (a text or number alone is one), cut at commas
    when ``split``; each once, in order. A mapping, a flag or an empty value is refused."""
    if isinstance(values, Mapping):
        raise pytest.UsageError(f"{declared.flag}: expected a list, got a mapping {shown(values)}")
    if isinstance(values, (str, int, float)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) and values is not None:
        raise pytest.UsageError(f"{declared.flag}: expected text or a list of text, got {shown(values)}")
    out: list[str] = []
    for value in values or []:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise pytest.UsageError(f"{declared.flag}: expected text items, got {shown(value)}")
        if not str(value).strip():
            raise pytest.UsageError(f"{declared.flag}: empty: give a value or leave the option out")
        parts = str(value).split(",") if declared.split else [str(value)]
        out.extend(p.strip() for p in parts if p.strip())
    return tuple(dict.fromkeys(out))
