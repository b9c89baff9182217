"""Errors that name the file and the field, so a user can fix their data without a debugger."""

from __future__ import annotations

import reprlib
from pathlib import Path

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlist, _SHOWN.maxdict = 3, 80, 80, 6, 6


def shown(value: object) -> str:
    """A short ``repr`` of a value read from a file, for an error message.

    Bounded in depth and length, so a hostile value (a megabyte string, a list nested a
    thousand deep) gives a one-line message instead of a huge one or a RecursionError.
    """
    return _SHOWN.repr(value)


class Rf100vlError(Exception):
    """Base class of every error this package raises on purpose."""


class DataError(Rf100vlError, ValueError):
    """Bad input data: the message always starts with the file and the field at fault."""

    def __init__(self, path: str | Path, field: str, message: str):
        self.path = str(path)
        self.field = field
        self.reason = message
        super().__init__(f"{self.path}: {field}: {message}")


class DatasetNotFoundError(Rf100vlError, FileNotFoundError):
    """A requested dataset is not on disk; the message says how to get it."""


class UnknownNameError(Rf100vlError, KeyError):
    """A name that is not in a registry or catalogue; the message lists the closest names."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain sentence
        return str(self.args[0])
