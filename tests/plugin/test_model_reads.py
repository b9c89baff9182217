"""The framework reads at most 8 members of a model outside the capability protocols, built-ins
included (``docs/architecture.md``, the adapters): the session talks to the wrapper
(``adapters/model.py``) and to the model's registry entry, never to ``Adapter`` internals.

Two counts: the plugin's source, outside the model classes, read for attribute reads on a model
(an ``Adapter``, a ``Detector``, an adapter class, or the wrapper's ``detector``); and a session
run of a built-in registered in the registry whose instance and class record every member the
plugin's code reads of them."""

from __future__ import annotations

import ast
import json
import re
import sys
from abc import ABCMeta
from pathlib import Path

import numpy as np
import pytest

import pytest_rf100vl
from pytest_rf100vl.adapters import registry
from pytest_rf100vl.adapters.base import Accounted, Adapter, Detections, Grounder, Pipelined, Prompted, Trainable
from pytest_rf100vl.adapters.model import READ

from tests.plugin.helpers import results

MAX_MEMBERS_READ = 8
"""The most members of a model the framework may read outside the capability protocols."""
CAPABILITIES = frozenset(name for protocol in (Grounder, Pipelined, Trainable, Prompted, Accounted)
                         for name in (*vars(protocol), *protocol.__annotations__) if not name.startswith("_"))
PLUGIN = Path(pytest_rf100vl.__file__).parent
MODEL_TYPES = re.compile(r"\b(Adapter|Detector|Pipelined)\b")
"""Annotations that make a name a model (or a model's class)."""
MODEL_NAMES = frozenset({"adapter", "detector"})
"""Names that hold a model whatever their annotation."""


def members_read(source: str) -> set[str]:
    """The attributes read of a model in ``source``: of a parameter or variable annotated with a
    model type or named as one (:data:`MODEL_NAMES`), of ``self.detector``, and the names given to
    ``getattr`` / ``hasattr`` on them."""
    read: set[str] = set()
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
        names = {a.arg for a in arguments if a.arg in MODEL_NAMES
                 or (a.annotation is not None and MODEL_TYPES.search(ast.unparse(a.annotation)))}
        names |= {node.target.id for node in ast.walk(function) if isinstance(node, ast.AnnAssign)
                  and isinstance(node.target, ast.Name) and MODEL_TYPES.search(ast.unparse(node.annotation))}
        names |= {target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
                  for target in node.targets if isinstance(target, ast.Name) and target.id in MODEL_NAMES}

        def is_model(node: ast.expr) -> bool:
            return (isinstance(node, ast.Name) and node.id in names) or (
                isinstance(node, ast.Attribute) and node.attr == "detector" and isinstance(node.value, ast.Name)
                and node.value.id == "self")

        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and is_model(node.value):
                read.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2 and is_model(node.args[0])
                  and isinstance(node.args[1], ast.Constant)):
                read.add(node.args[1].value)
    return read


def framework_sources() -> dict[str, str]:
    """The plugin's modules that are not model code: everything outside ``adapters/``, the
    registry, and the wrapper the session runs every model through (``Model``; the Python API's
    ``as_model``, which wraps an adapter a caller runs directly, is left out)."""
    sources = {str(path.relative_to(PLUGIN)): path.read_text(encoding="utf-8") for path in PLUGIN.rglob("*.py")
               if "adapters" not in path.relative_to(PLUGIN).parts}
    sources["adapters/registry.py"] = (PLUGIN / "adapters" / "registry.py").read_text(encoding="utf-8")
    wrapper = (PLUGIN / "adapters" / "model.py").read_text(encoding="utf-8")
    sources["adapters/model.py"] = wrapper.split("\ndef as_model(")[0]
    return sources


def test_the_plugin_reads_only_the_listed_members_of_a_model_outside_the_protocols() -> None:
    read = {name: members_read(source) - CAPABILITIES for name, source in framework_sources().items()}
    outside = set().union(*read.values())
    assert outside == set(READ), {name: sorted(members) for name, members in read.items() if members}
    assert len(outside) <= MAX_MEMBERS_READ


def test_the_count_sees_a_new_read() -> None:
    added = "def run(adapter, split):\n    return adapter.tasks, getattr(adapter, 'concurrency', 1)\n"
    assert members_read(added) == {"tasks", "concurrency"}
    typed = ("def run(m: 'type[Adapter] | None', d: Detector):\n"
             "    x: Adapter = m()\n    return m.recipes, d.device, x.dtype\n")
    assert members_read(typed) == {"recipes", "device", "dtype"}
    wrapper = "class M:\n    def f(self):\n        return self.detector.describe(), self.entry.name\n"
    assert members_read(wrapper) == {"describe"}


READ_BY_PLUGIN: set[str] = set()
"""Every member of :class:`Spy` (instance or class) that plugin code read during a run."""


def _record(member: str) -> None:
    caller = sys._getframe(2).f_globals.get("__name__", "")
    if caller.startswith("pytest_rf100vl") and caller != "pytest_rf100vl.adapters.base" and not member.startswith("__"):
        READ_BY_PLUGIN.add(member)  # what Adapter's own code reads of itself is the model's business


class Recording(ABCMeta):
    def __getattribute__(cls, member: str):
        _record(member)
        return super().__getattribute__(member)


class Spy(Adapter, metaclass=Recording):
    """A built-in in the registry: one box per image, of the first class."""

    name = "spy"
    option_defaults = {"size": 0.5}

    def __getattribute__(self, member: str):
        _record(member)
        return object.__getattribute__(self, member)

    def predict(self, batch):
        size = self.options["size"]
        return [Detections(np.array([[0.0, 0.0, item.image.width * size, item.image.height * size]]), np.array([0.9]),
                           np.array([0])) for item in batch]


def test_a_session_reads_at_most_eight_members_of_a_built_in(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.ADAPTERS.builtin, "spy", f"{__name__}:Spy")
    READ_BY_PLUGIN.clear()
    run = ("--rf100vl-model=spy", "--rf100vl-dataset=sample", "--rf100vl-device=cpu", "--rf100vl-limit=3",
           "--rf100vl-adapter-option=spy.size=0.25")
    pytester.runpytest_inprocess(*run).assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    assert row["model"] == "spy" and json.loads(row["adapter_options"]) == {"size": 0.25}
    assert row["n_images"] == row["n_predictions"] == 3
    outside = READ_BY_PLUGIN - CAPABILITIES
    assert {"entry", "set_task", "predict"} <= outside <= set(READ), sorted(READ_BY_PLUGIN)
    assert len(outside) <= MAX_MEMBERS_READ
