"""The checked argument types of ``rf100vl-hf``: each converts a command-line value and refuses
one out of range with what it expected, so a bad argument is argparse's one-line usage error
(exit status 2) naming the option. Every command's parser takes its types from here."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any, Callable


def checked(kind: Callable[[str], Any], test: Callable[[Any], bool], expected: str) -> Callable[[str], Any]:
    """An argparse ``type=`` that converts with ``kind`` and accepts what passes ``test``."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
            good = test(value)
        except (ValueError, OSError):  # OSError: a path the system refuses to look at (too long...)
            good = False
        if not good:
            raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}")
        return value

    convert.__name__ = expected  # argparse names the type in some messages
    return convert


INTEGER = checked(int, lambda v: True, "an integer")
POSITIVE_INTEGER = checked(int, lambda v: v >= 1, "an integer of at least 1")
FRACTION = checked(float, lambda v: math.isfinite(v) and 0 < v <= 1, "a number in (0, 1]")
POSITIVE_NUMBER = checked(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
DIRECTORY = checked(Path, lambda v: v.is_dir(), "an existing folder")


def _can_be_folder(path: Path) -> bool:
    """Whether ``path`` is a folder, or can be made one: its nearest existing ancestor is a folder."""
    for place in (path, *path.absolute().parents):
        if place.exists():
            return place.is_dir()
    return True


FOLDER = checked(Path, _can_be_folder, "a folder, or a path where one can be made")
REPO_ID = checked(
    str,
    lambda v: len(v) <= 96 and re.fullmatch(r"(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*", v) is not None
    and ".." not in v and "--" not in v,
    "a Hub repository id ORG/NAME (letters, digits, '-', '_', '.')",
)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def typed_option(key: str, value: Any, default: Any) -> Any:
    """An option given as text (command line, ini file) in the type of its default.

    ``None`` defaults take a number or ``none``; other values pass through unchanged.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        if isinstance(default, bool):
            if text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
            raise ValueError("expected true or false")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float) or (default is None and text.lower() != "none"):
            return float(text)
        if default is None:
            return None
    except ValueError as exc:
        raise ValueError(f"option {key}={value!r}: {exc}") from None
    return value
