"""The one markdown writer: results summaries, leaderboards and dataset cards use it, so a
``|`` or a line break inside a cell is escaped the same way everywhere, and no text from a
results row or a card (a model name, a class name) can act on the terminal or the document
it reaches: each control character is written as its escape (:mod:`rf100vl_hf.controls`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rf100vl_hf.controls import one_line, visible


def cell(value: object) -> str:
    """Text for one cell: whitespace runs (line breaks included) become one space, ``|`` is
    escaped, and so is every other character that acts instead of printing."""
    return one_line(value).replace("|", "\\|")


def table(header: Sequence[object], rows: Iterable[Sequence[object]], numeric: Iterable[int] = ()) -> list[str]:
    """The lines of a markdown table; columns whose index is in ``numeric`` are right-aligned."""
    right = set(numeric)
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, *rows]
    return ["| " + " | ".join(cell(value) for value in line) + " |" for line in lines[:1]] + [
        "| " + " | ".join(align) + " |"
    ] + ["| " + " | ".join(cell(value) for value in line) + " |" for line in lines[1:]]


def document(lines: Iterable[str]) -> str:
    """Lines of markdown as one text, with every character that acts instead of printing
    (tabs and line breaks aside) written as its escape: a summary reaches terminals too."""
    return visible("\n".join(lines), multiline=True)
