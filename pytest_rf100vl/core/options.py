"""Options declared once, as fields of the typed sections of a run's configuration.

Each field made by :func:`option` is a key in a ``--rf100vl-config`` file and an ini key
``PREFIX_NAME``; the few a run changes most are also a command-line option ``--PREFIX-NAME``,
and a benchmark kind's others are keys of its dict option (``--rf100vl-data-option KEY=VALUE``,
``--uouo-option KEY=VALUE``), so the command line stays short (the README's options table).
:class:`Option` parses and checks a raw value into the field's type, so a bad value is one
usage error naming the option, wherever it was given. Model: lm-eval's
``config/evaluate_config.py`` (a dataclass of the run, filled from the command line or a file).

Example: a section with one option::

    @dataclass(frozen=True)
    class ToyOptions:
        objects: str = option("objects", "str", "what the toy benchmark counts", "NAME", prefix="toy",
                              default="squares")

gives ``--toy-objects NAME``, the ini key ``toy_objects`` and ``toy: {objects: ...}`` in a file
(``via="option"`` would give ``--toy-option objects=NAME`` instead of the flag).
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
FILE = "file"
"""``Option.via`` of an option set in a config file or the ini file only."""
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Option:
    """One option.

    ``kind`` is ``list`` (repeatable, comma-separated when ``split``), ``str``, ``int``,
    ``float`` (finite), ``path`` or ``flag`` (on when given; ini ``true``/``false``); empty text
    is refused, as an unset shell variable gives it (``--rf100vl-results=$OUT``). ``choices``
    limits a ``str``; ``keywords`` are words a ``path`` takes as themselves (``off``);
    ``minimum`` bounds a number; ``check`` may refuse any other value by raising ``ValueError``
    with the reason, or convert it (``--rf100vl-shard 1/4`` becomes ``(1, 4)``). ``via``: where
    the option is given besides a config file and the ini file: ``""`` its own flag, ``FILE``
    nowhere else, another name the dict option of its prefix (``"data-option"``:
    ``--rf100vl-data-option NAME=VALUE``). A ``dict`` option takes ``KEY=VALUE`` items whose
    keys are its ``choices`` (the names of the options given through it).
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
    via: str = ""
    show: Callable[[Any], str] = str
    """The text of a parsed value, as the command line writes it (``(1, 4)`` is ``1/4``)."""

    @property
    def flag(self) -> str:
        """How messages name the option: its flag, its dict option's key, or its ini key."""
        if self.via == FILE:
            return self.dest
        return f"--{self.prefix}-{self.via} {self.name}" if self.via else f"--{self.prefix}-{self.name}"

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` and its ini key."""
        return f"{self.prefix}_{self.name.replace('-', '_')}"

    def parse(self, raw: Any) -> Any:
        """The typed, checked value of a raw command-line, ini or file value (``None``: the default)."""
        if self.kind not in ("list", "dict") and raw is None:
            return self.default
        if self.kind == "dict":
            return self._key_values(_items(self, raw))
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

    def _key_values(self, items: tuple[str, ...]) -> dict[str, list[str]]:
        """A dict option's ``KEY=VALUE`` items by key (``-`` or ``_`` in a key), each key's values in order."""
        given: dict[str, list[str]] = {}
        for item in items:
            key, sep, value = item.partition("=")
            key = key.strip().replace("_", "-")
            if not sep:
                raise pytest.UsageError(f"{self.flag}: expected KEY=VALUE, got {shown(item)}")
            if key not in self.choices:
                raise pytest.UsageError(f"{self.flag}: unknown key {shown(key)} (keys: {', '.join(self.choices)})")
            given.setdefault(key, []).append(value.strip())
        return given

    def from_text(self, texts: list[str]) -> Any:
        """The raw value of the texts a dict option gave this option (a flag's ``true``/``false``;
        a list's every text; another kind's last), for :meth:`parse`."""
        if self.kind == "list":
            return texts
        text = texts[-1]
        if self.kind == "flag":
            if text.lower() not in _TRUE + _FALSE:
                raise pytest.UsageError(f"{self.flag}: expected true or false, got {shown(text)}")
            return text.lower() in _TRUE
        return text

    def relative_to(self, folder: Path, raw: Any) -> Any:
        """A raw ``path`` value resolved against ``folder`` (where pytest started, or the folder
        of the config or ini file that gave it); another kind's value, a keyword, empty text or
        a value other than text as given, for :meth:`parse` to take or refuse."""
        if self.kind != "path" or not isinstance(raw, str) or not raw.strip() or _keyword(self, raw) is not None:
            return raw
        return folder / Path(raw).expanduser()

    def as_args(self, value: Any) -> list[str]:
        """The command-line arguments that give ``value`` (none for the default): the option's
        flag, its dict option, or pytest's ``--override-ini`` of its ini key."""
        if value == self.default or value is None:
            return []
        if self.kind == "flag":
            texts = ["true"] if value else []
        elif self.kind == "list":
            items = [f"{key}={text}" for key, text in value.items()] if isinstance(value, Mapping) else value
            texts = [self.show(item) for item in items]
        else:
            texts = [self.show(value)]
        if self.via == FILE:
            return [f"--override-ini={self.dest}={text}" for text in texts]
        if self.via:
            return [f"--{self.prefix}-{self.via}={self.name}={text}" for text in texts]
        if self.kind == "flag":
            return [self.flag]
        return [f"{self.flag}={text}" for text in texts]


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


def dict_options(options: tuple[Option, ...]) -> tuple[Option, ...]:
    """The dict options through which ``options`` are given (one per prefix and ``via``),
    each listing its keys in its help."""
    groups: dict[tuple[str, str], list[str]] = {}
    for declared in options:
        if declared.via and declared.via != FILE:
            groups.setdefault((declared.prefix, declared.via), []).append(declared.name)
    return tuple(Option(via, "dict", f"set KEY of the config file's {prefix} section (repeatable): "
                        f"{', '.join(keys)}", "KEY=VALUE", prefix=prefix, choices=tuple(keys))
                 for (prefix, via), keys in groups.items())


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
    """A list (or dict) option's items: each given value (a text or number alone is one), cut at commas
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
