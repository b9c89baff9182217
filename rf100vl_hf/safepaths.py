"""Keep the files read from a folder inside that folder, whatever links it holds, and read
only regular files.

A dataset folder may itself be a symbolic link (a data folder made of links to exports
kept elsewhere is fine), but a file or sub-folder *inside* it that links outside would
embed another part of the disk in the Arrow cache and in every exported shard. Both
readers, RF100-VL exports and UOUO cut-out sources, refuse such links with this check,
and refuse a FIFO, a device or a socket by name before opening it: opening a FIFO waits
for a writer that never comes, and a device reads without end.
"""

from __future__ import annotations

import stat
from pathlib import Path

from rf100vl_hf.controls import control_problem
from rf100vl_hf.errors import DataError, shown

_SPECIAL = (
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def resolve_inside(root: Path, path: Path, where: str | Path, field: str, *, what: str = "folder") -> Path:
    """``path`` with every link resolved, or a :class:`DataError` at ``where``/``field``
    when it leads outside ``root`` (itself resolved first, so ``root`` may be a link)."""
    try:
        resolved = path.resolve()
    except RuntimeError:  # what Path.resolve raises on a loop of links before Python 3.13
        raise DataError(where, field, f"{path} cannot be followed: it is a loop of links") from None
    except OSError as exc:
        raise DataError(where, field, f"{path} cannot be followed ({exc.strerror})") from None
    if not resolved.is_relative_to(root.resolve()):
        raise DataError(where, field, f"{path} leads outside the {what} {root} (it resolves to {resolved})")
    return resolved


def special_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is a FIFO, a device or a socket, else None."""
    return next((kind for test, kind in _SPECIAL if test(mode)), None)


def refuse_special(path: Path, where: str | Path, field: str) -> None:
    """A :class:`DataError` at ``where``/``field`` when ``path`` (links followed) is a FIFO, a
    device or a socket; a path that cannot be looked at is left to the read that reports it."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return
    kind = special_kind(mode)
    if kind:
        raise DataError(where, field, f"{shown(path.name)} is a {kind}, not a regular file, so it is not opened")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be a file name or a name shown to people, or None when it can.

    A control character (a NUL, which cannot be in a path, an ANSI escape, a bidi override:
    see :mod:`rf100vl_hf.controls`) acts instead of printing, and a lone surrogate
    (``"\\ud800"`` in JSON) is not Unicode: it cannot be written as UTF-8 into Arrow, parquet
    or a card.
    """
    problem = control_problem(text)
    if problem:
        return problem
    surrogate = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if surrogate is not None:
        return f"contains a lone surrogate (\\u{ord(surrogate):04x}), which is not valid Unicode text"
    return None
