"""Benchmark kinds (:mod:`.base`): RF100-VL detection and UOUO grounding are built in; other
packages add kinds through the ``rf100vl.kinds`` entry-point group, a name that collides with
a built-in being an error naming both."""

from __future__ import annotations

from pytest_rf100vl.core.registry import Registry
from pytest_rf100vl.kinds.base import BenchmarkKind

ENTRY_POINT_GROUP = "rf100vl.kinds"

BUILTIN: dict[str, str] = {
    "rf100vl": "pytest_rf100vl.kinds.rf100vl.kind:Rf100vlKind",
    "uouo": "pytest_rf100vl.kinds.uouo.kind:UouoKind",
}

KINDS: Registry[BenchmarkKind] = Registry("benchmark kind", ENTRY_POINT_GROUP, BenchmarkKind, BUILTIN)


def kind_classes() -> list[type[BenchmarkKind]]:
    """Every registered kind, built-ins first; two kinds with one test function are an error."""
    classes = [KINDS.load(name) for name in KINDS.table()]
    tests: dict[str, str] = {}
    for cls in classes:
        if cls.test_name in tests:
            raise TypeError(f"benchmark kinds {tests[cls.test_name]!r} and {cls.name!r} both name their test "
                            f"{cls.test_name!r}")
        tests[cls.test_name] = cls.name
    return classes


def option_sections() -> dict[str, type]:
    """Each kind's options section by kind name: what a run's configuration is read with
    besides the core sections."""
    return {kind.name: kind.options_section for kind in kind_classes()}


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "KINDS", "BenchmarkKind", "kind_classes", "option_sections"]
