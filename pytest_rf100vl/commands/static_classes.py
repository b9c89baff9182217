"""Class attributes read from source, so listing adapters imports no model library.

Adapter modules import torch and transformers when they load (several seconds); their
``default_checkpoint``, ``prompt_modes`` and ``tasks`` are literals, or names bound to
literals, set in the class or one of its bases. :func:`class_attributes` parses the modules
with :mod:`ast`, follows ``from X import Y``, and looks each attribute up along the class's
method resolution order (C3, as Python computes it). An attribute written any other way (a
call, an attribute of another object, a decorated class or one with a metaclass) is read by
importing the class instead.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import Any

TERMINAL_MODULES = frozenset({"abc", "builtins", "typing"})
"""Modules whose classes (``ABC``, ``Generic``, ``Protocol``, ``object``) set none of the attributes."""

ClassKey = tuple[str, str]
"""A class as (module, name)."""


class _Unread(Exception):
    """The source does not say the value plainly; the class is imported instead."""


class _Source:
    """Parsed modules and their classes, read once."""

    def __init__(self) -> None:
        self._modules: dict[str, ast.Module] = {}

    def module(self, name: str) -> ast.Module:
        if name not in self._modules:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                raise _Unread(name)
            self._modules[name] = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        return self._modules[name]

    def binding(self, module: str, name: str) -> tuple[str, ast.AST]:
        """Where ``name`` is bound at the top of ``module``: a class, an import or an assignment."""
        found: tuple[str, ast.AST] | None = None
        for node in self.module(module).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                found = (module, node)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        found = (_absolute(module, node), ast.Name(alias.name))
            elif _assigned(node) == name:
                found = (module, node.value)  # type: ignore[attr-defined]
        if found is None and hasattr(builtins, name):
            found = ("builtins", ast.Name(name))
        if found is None:
            raise _Unread(f"{module}.{name}")
        where, node = found
        if isinstance(node, ast.Name):  # imported: look it up where it comes from
            if where in TERMINAL_MODULES:
                return where, ast.ClassDef(name=node.id, bases=[], keywords=[], body=[], decorator_list=[])
            return self.binding(where, node.id)
        return found

    def class_def(self, key: ClassKey) -> ast.ClassDef:
        module, node = self.binding(*key)
        if not isinstance(node, ast.ClassDef) or node.decorator_list or node.keywords:
            raise _Unread(f"{key[0]}.{key[1]}")
        return node

    def bases(self, key: ClassKey) -> list[ClassKey]:
        if key[0] in TERMINAL_MODULES:
            return []
        found = []
        for base in self.class_def(key).bases:
            base = base.value if isinstance(base, ast.Subscript) else base  # Generic[...], Base[T]
            if not isinstance(base, ast.Name):
                raise _Unread(ast.unparse(base))
            module, node = self.binding(key[0], base.id)
            if not isinstance(node, ast.ClassDef):
                raise _Unread(base.id)
            found.append((module, base.id))
        return found

    def mro(self, key: ClassKey) -> list[ClassKey]:
        """Python's C3 linearisation of the class and its bases."""
        bases = self.bases(key)
        return [key, *_merge([self.mro(base) for base in bases] + [bases])]

    def value(self, module: str, node: ast.AST) -> Any:
        """The value of a literal expression in ``module``: constants, tuples and lists, names
        bound to them, f-strings of them and sums of them."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(module, item) for item in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Name):
            where, bound = self.binding(module, node.id)
            if isinstance(bound, ast.ClassDef):
                raise _Unread(node.id)
            return self.value(where, bound)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    if part.conversion != -1 or part.format_spec is not None:
                        raise _Unread(ast.unparse(part))
                    parts.append(str(self.value(module, part.value)))
                else:
                    parts.append(str(self.value(module, part)))
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.value(module, node.left) + self.value(module, node.right)
        raise _Unread(ast.unparse(node))

    def attribute(self, key: ClassKey, name: str) -> Any:
        """``name`` as the class would resolve it: the first class of its MRO that sets it."""
        for owner in self.mro(key):
            if owner[0] in TERMINAL_MODULES:
                continue
            for node in self.class_def(owner).body:
                if _assigned(node) == name:
                    return self.value(owner[0], node.value)  # type: ignore[attr-defined]
        raise _Unread(f"{key[1]}.{name}")


def _assigned(node: ast.AST) -> str | None:
    """The one name a statement binds to a value (``x = ...``, ``x: T = ...``), if it is that."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` reads, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = importlib.util.resolve_name("." * node.level + (node.module or ""), _package_of(module))
    return package


def _package_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    return module if spec is not None and spec.submodule_search_locations is not None else module.rpartition(".")[0]


def _merge(sequences: list[list[ClassKey]]) -> list[ClassKey]:
    """C3's merge; an order Python would refuse cannot be read."""
    sequences = [list(s) for s in sequences if s]
    merged: list[ClassKey] = []
    while sequences:
        head = next((s[0] for s in sequences if not any(s[0] in other[1:] for other in sequences)), None)
        if head is None:
            raise _Unread("inconsistent method resolution order")
        merged.append(head)
        sequences = [[c for c in s if c != head] for s in sequences]
        sequences = [s for s in sequences if s]
    return merged


def class_attributes(target: str, names: Sequence[str]) -> dict[str, Any]:
    """The class attributes ``names`` of ``module:Class``, read from source when it says them
    plainly, else by importing the class (whose import errors propagate)."""
    module, _, qualname = target.partition(":")
    source = _Source()
    try:
        return {name: source.attribute((module, qualname), name) for name in names}
    except (_Unread, SyntaxError, OSError, UnicodeDecodeError, ImportError, ValueError):
        cls = reduce(getattr, qualname.split("."), importlib.import_module(module))
        return {name: getattr(cls, name) for name in names}
