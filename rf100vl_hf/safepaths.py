"""Keep the files read from a folder inside that folder, whatever links it holds.

A dataset folder may itself be a symbolic link (a data folder made of links to exports
kept elsewhere is fine), but a file or sub-folder *inside* it that links outside would
embed another part of the disk in the Arrow cache and in every exported shard. Both
readers, RF100-VL exports and UOUO cut-out sources, refuse such links with this check.
"""

from __future__ import annotations

from pathlib import Path

from rf100vl_hf.errors import DataError


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


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be a file name or a stored string, or None when it can.

    A NUL cannot be in a path, and a lone surrogate (``"\\ud800"`` in JSON) is not Unicode:
    it cannot be written as UTF-8 into Arrow, parquet or a card.
    """
    if "\x00" in text:
        return "contains a NUL character"
    surrogate = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if surrogate is not None:
        return f"contains a lone surrogate (\\u{ord(surrogate):04x}), which is not valid Unicode text"
    return None
