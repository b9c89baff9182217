"""Keep the paths read from a folder inside that folder, and read only regular files.

A path that climbs out of its folder (``../``, an absolute ``file_name``) is refused: the
annotation file names a file of the export. Links are not checked: an export (or a cut-out
source) may link files kept elsewhere, and what a link leads to is read as the file itself.
A FIFO, a device or a socket is refused by name before it is opened: opening a FIFO waits for
a writer that never comes, and a device reads without end. :func:`read_file` is the one read
of a file whose link may lead anywhere: a folder, a device or a file that cannot be read
(``/proc/self/mem``) is an error naming it, and what it reads is embedded only once the
caller has checked it (an image is probed: a text file is never embedded).
"""

from __future__ import annotations

import os
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
    """``path`` under the resolved ``root`` (its ``..`` steps taken; links inside it are left to
    be followed when it is read), or a :class:`DataError` at ``where``/``field`` when it leads
    outside ``root`` or is a loop of links."""
    inside = Path(os.path.normpath(os.path.abspath(path)))
    top = Path(os.path.normpath(os.path.abspath(root)))
    if not inside.is_relative_to(top):
        raise DataError(where, field, f"{path} leads outside the {what} {root}")
    try:
        path.resolve()  # only to find a loop of links: where a link leads is not checked
    except RuntimeError:  # what Path.resolve raises on a loop of links before Python 3.13
        raise DataError(where, field, f"{path} cannot be followed: it is a loop of links") from None
    except OSError as exc:
        raise DataError(where, field, f"{path} cannot be followed ({exc.strerror})") from None
    return root.resolve() / inside.relative_to(top)


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


def read_file(path: Path, field: str = "file", limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), or a :class:`DataError` at
    ``path``/``field`` saying what it is instead: a folder, a FIFO, a device, unreadable, or
    (``limit``) larger than ``limit`` bytes, found by reading one byte past it."""
    refuse_special(path, path, field)
    if path.is_dir():
        raise DataError(path, field, "is a directory, not a file")
    try:
        with path.open("rb") as handle:
            data = handle.read(-1 if limit is None else limit + 1)
    except OSError as exc:
        raise DataError(path, field, f"cannot be read ({exc.strerror or exc})") from None
    if limit is not None and len(data) > limit:
        raise DataError(path, field, f"is larger than {limit:,} bytes, more than it may hold")
    return data
