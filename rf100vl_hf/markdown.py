"""The one markdown-table writer: results summaries, leaderboards and dataset cards use it,
so a ``|`` or a line break inside a cell is escaped the same way everywhere."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object) -> str:
    """Text for one cell: whitespace runs (line breaks included) become one space, ``|`` is escaped."""
    return " ".join(str(value).split()).replace("|", "\\|")


def table(header: Sequence[object], rows: Iterable[Sequence[object]], numeric: Iterable[int] = ()) -> list[str]:
    """The lines of a markdown table; columns whose index is in ``numeric`` are right-aligned."""
    right = set(numeric)
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, *rows]
    return ["| " + " | ".join(cell(value) for value in line) + " |" for line in lines[:1]] + [
        "| " + " | ".join(align) + " |"
    ] + ["| " + " | ".join(cell(value) for value in line) + " |" for line in lines[1:]]
