"""The test the plugin runs for each (model, dataset) pair of the matrix.

It is collected by :class:`pytest_rf100vl.collect.MatrixModule` under the node id
``rf100vl``, so pairs read ``rf100vl::test_detection[owlv2-bees]`` and ``-k`` selects them
by model and dataset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_rf100vl.session import PairRun


def test_detection(rf100vl_run: "PairRun") -> None:
    """The pair ran over its split; its AP50:95 meets its threshold when it has one."""
    if rf100vl_run.failure:
        pytest.fail(rf100vl_run.failure, pytrace=False)
