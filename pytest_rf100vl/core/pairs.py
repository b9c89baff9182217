"""One test of the matrix, and how to find it on a collected item."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Pair:
    """One test of the matrix: an adapter spec, a dataset name and the dataset's benchmark kind."""

    model: str
    dataset: str
    kind: str

    @property
    def id(self) -> str:
        return f"{self.model}-{self.dataset}"


def pair_of(item: pytest.Item) -> Pair | None:
    """The pair a collected test is parametrized with (``None`` for any other test)."""
    callspec: Any = getattr(item, "callspec", None)
    return callspec.params.get("rf100vl_pair") if callspec is not None else None
