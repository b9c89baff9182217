"""Registries of named, lazily imported classes: built-ins as ``"module:Class"`` strings, plus an
entry-point group for other packages, so adding one touches one file (or one line of another
package's ``pyproject.toml``). Model adapters (``rf100vl.adapters``) and benchmark kinds
(``rf100vl.kinds``) are registered this way."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from functools import cache, reduce
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from rf100vl_hf.errors import UnknownNameError, closest, needs_extra

T = TypeVar("T")


@cache
def _group(find: Callable[..., Any], group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``, read once per process and search path: a scan reads the
    metadata of every installed distribution (tens of milliseconds), and a session asks each
    registry many times (every pytest process, each xdist worker too, before its first test).
    ``find`` is part of the key, so a replaced reader (a test's) is asked afresh."""
    return tuple(find(group=group))


class RegistryError(TypeError):
    """An entry point that collides with a built-in name, or one that is not the right class."""


class Registry(Generic[T]):
    """Names -> ``module:attr`` of subclasses of ``base``, from ``builtin`` and entry-point ``group``."""

    def __init__(self, what: str, group: str, base: type[T], builtin: dict[str, str]):
        self.what = what
        self.group = group
        self.base = base
        self.builtin = builtin

    def table(self) -> dict[str, str]:
        """Every name -> ``module:attr``; an entry point that reuses a built-in name is an error
        naming both, never a silent shadow."""
        table = dict(self.builtin)
        for ep in _group(entry_points, self.group, tuple(sys.path)):
            if ep.name in table and table[ep.name] != ep.value:
                dist = f" (package {ep.dist.name})" if ep.dist is not None else ""
                raise RegistryError(
                    f"{self.what} {ep.name!r} is registered twice: {table[ep.name]} and the entry point "
                    f"{ep.value}{dist} in group {self.group!r}; rename the entry point"
                )
            table[ep.name] = ep.value
        return table

    def load(self, name: str) -> type[T]:
        """The class registered under ``name``, imported on first use (heavy code loads lazily)."""
        table = self.table()
        if name not in table:
            raise self.unknown(name, sorted(table))
        module, _, attr = table[name].partition(":")
        with needs_extra(f"{self.what} {name!r}"):
            cls = reduce(getattr, attr.split("."), importlib.import_module(module))
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise RegistryError(
                f"{self.what} {name!r} points at {table[name]}, which is not a subclass of {self.base.__name__}"
            )
        return cls

    def unknown(self, name: str, names: list[str]) -> UnknownNameError:
        """An unknown name: the closest names, then every one registered (a registry is short,
        so none is cut off, unlike the long catalogue of datasets)."""
        near = closest(name, names)
        hint = f"; closest: {', '.join(near)}" if near else ""
        return UnknownNameError(f"unknown {self.what} {name!r}{hint}; available: {', '.join(names)}")
