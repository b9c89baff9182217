"""What a benchmark kind, resuming and the xdist hooks see of the session.

``session/matrix.py``'s ``MatrixSession`` is the one implementation; rooms below it type their
``session`` arguments with this protocol instead, so none of them imports the session
(which imports them)."""

from __future__ import annotations

from typing import Any, Protocol

from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.core.config import RunConfig


class MatrixView(Protocol):
    config: RunConfig
    pairs: list[Pair]
    rules: list[Any]
    """The thresholds file's rules (``session/thresholds.py``)."""
    loop: Any
    """How the inference loop runs (``engine/runner.py``'s ``LoopOptions``)."""
    writer: Any
    """The results folder (``report/results_folder.py``'s ``ResultsWriter``)."""
    command: str
    """The session's command line, as rows record it."""
    missing: dict[str, str]
    errors: dict[str, str]
    left_out: dict[str, str]

    @property
    def device(self) -> str: ...

    def dataset(self, pair: Pair, split: str | None = None) -> Any: ...
