"""The tests the plugin runs: one test function per benchmark kind (``kind.test_name``), each
parametrized over that kind's pairs. They are collected under the node id ``rf100vl``, so
pairs read ``rf100vl::test_detection[owlv2-bees]`` and ``rf100vl::test_grounding[owlv2-uouo-mmd]``,
and ``-k`` selects them by model, dataset and kind."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_rf100vl.kinds.base import BenchmarkKind
    from pytest_rf100vl.session.stages import PairRun

MODULE = "pytest_rf100vl.matrix"


def meets_thresholds(rf100vl_run: "PairRun") -> None:
    """A pair fails when its kind found a score below its minimum."""
    if rf100vl_run.failure:
        pytest.fail(rf100vl_run.failure, pytrace=False)


def pair_test(kind: type["BenchmarkKind"]) -> Callable[["PairRun"], None]:
    """The test function of ``kind``'s pairs, named and documented by the kind."""

    def test(rf100vl_run: "PairRun") -> None:
        meets_thresholds(rf100vl_run)

    test.__name__ = test.__qualname__ = kind.test_name
    test.__doc__ = kind.test_doc
    test.__module__ = MODULE
    return test


def matrix_tests(kinds: list[type["BenchmarkKind"]]) -> ModuleType:
    """The module the ``rf100vl`` node collects: one test per kind."""
    module = ModuleType(MODULE, __doc__)
    for kind in kinds:
        setattr(module, kind.test_name, pair_test(kind))
    return module
