"""The tests the plugin runs for each (model, dataset) pair of the matrix.

They are collected by :class:`pytest_rf100vl.collect.MatrixModule` under the node id
``rf100vl``, so pairs read ``rf100vl::test_detection[owlv2-bees]`` (RF100-VL) and
``rf100vl::test_grounding[owlv2-uouo-mmd]`` (UOUO), and ``-k`` selects them by model,
dataset and benchmark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_rf100vl.session import PairRun


def _meets_thresholds(run: "PairRun") -> None:
    if run.failure:
        pytest.fail(run.failure, pytrace=False)


def test_detection(rf100vl_run: "PairRun") -> None:
    """The pair ran over its split; its AP50:95 meets its threshold when it has one."""
    _meets_thresholds(rf100vl_run)


def test_grounding(rf100vl_run: "PairRun") -> None:
    """The pair answered every mosaic; its quadrant accuracy and mIoU meet their thresholds when they have them."""
    _meets_thresholds(rf100vl_run)
