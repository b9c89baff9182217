"""The keys under which the plugin keeps its state in pytest's ``config.stash``."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.core.matrix_view import MatrixView

SESSION_KEY = pytest.StashKey[MatrixView]()
"""The session's matrix state (``session/matrix.py``), created on first use."""
CONFIG_KEY = pytest.StashKey[RunConfig]()
KINDS_KEY = pytest.StashKey[list[Any]]()
"""The session's benchmark kinds (``kinds/base.py``'s ``BenchmarkKind``), one per kind class."""
