"""What the pair's stages, resuming and the xdist hooks see of the session.

``session/matrix.py``'s ``MatrixSession`` is the one implementation; the modules it uses type
their ``session`` arguments with this protocol instead, so none of them imports it (it
imports them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from rf100vl_hf.results.schema import ResultRow

from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.core.minimums import Rule
from pytest_rf100vl.core.pairs import Pair


class MatrixView(Protocol):
    config: RunConfig
    pairs: list[Pair]
    rules: list[Rule]
    """The thresholds file's rules (``session/thresholds.py``)."""
    kinds: dict[str, Any]
    """The session's benchmark kinds by name (``kinds/base.py``'s ``BenchmarkKind``)."""
    loop: Any
    """How the inference loop runs (``engine/runner.py``'s ``LoopOptions``)."""
    writer: Any
    """The results folder (``rf100vl_hf/results/folder.py``'s ``ResultsWriter``)."""
    command: str
    missing: dict[str, str]
    errors: dict[str, str]
    left_out: dict[str, str]
    reused: list[ResultRow]
    """The rows reused from earlier runs (``session/resume.py``): not in ``results.jsonl`` again."""

    def cost_of(self, pairs: list[Pair]) -> Callable[[Pair], float]:
        """Each pair's expected cost (shards and xdist workers are balanced on it)."""
        ...
