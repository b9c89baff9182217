"""Errors that name the file and the field, so a user can fix their data without a debugger."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlist, _SHOWN.maxdict = 3, 80, 80, 6, 6


def shown(value: object) -> str:
    """A short ``repr`` of a value read from a file, for an error message.

    Bounded in depth and length, so a hostile value (a megabyte string, a list nested a
    thousand deep) gives a one-line message instead of a huge one or a RecursionError.
    """
    return _SHOWN.repr(value)


def os_error_line(exc: OSError) -> str:
    """An OSError as one line, ``<path>: <reason>`` (missing, unreadable, not a folder, disk
    full); its message alone when it names no file."""
    if exc.filename is None:
        return " ".join(str(exc).split()) or type(exc).__name__
    target = f" -> {exc.filename2}" if exc.filename2 else ""
    return f"{exc.filename}{target}: {exc.strerror or ' '.join(str(exc).split())}"


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


class MissingExtraError(Rf100vlError, ImportError):
    """A feature whose packages come with an extra that is not installed; the message names the
    ``pip install`` that brings them."""


EXTRA_OF: dict[str, str] = {
    **dict.fromkeys(("pytest", "pytest_benchmark", "xdist", "matplotlib", "scipy"), "plugin"),
    **dict.fromkeys(("torch", "torchvision", "transformers", "accelerate", "tokenizers", "timm", "open_clip"), "models"),
    **dict.fromkeys(("openai", "google"), "served"),
    "ultralytics": "yolo",
    "rfdetr": "rfdetr",
    "wandb": "wandb",
    "mlflow": "mlflow",
    **dict.fromkeys(("xgboost", "sklearn", "rembg", "onnxruntime", "onnx"), "curate"),
}
"""Top-level module -> the extra of ``pyproject.toml`` that installs it (README, "Set-up")."""


@contextmanager
def needs_extra(what: str, extra: str | None = None) -> Iterator[None]:
    """Turn a missing module of an extra, imported inside the block, into a
    :class:`MissingExtraError` saying that ``what`` needs it and which extra brings it
    (``extra`` when given: a feature whose one extra brings all it needs, others' included).

    Example::

        with needs_extra("the owlv2 adapter"):
            import torch  # absent: 'the owlv2 adapter needs torch, which the [models] extra installs: ...'
    """
    try:
        yield
    except ModuleNotFoundError as error:
        module = (error.name or "").partition(".")[0]
        if module not in EXTRA_OF:
            raise
        extra = extra or EXTRA_OF[module]
        raise MissingExtraError(f'{what} needs {module}, which the [{extra}] extra installs: '
                                f'pip install "rf100vl-hf[{extra}]"') from error


def closest(name: str, candidates: list[str], n: int = 5) -> list[str]:
    """The candidates that look most like ``name``, for 'did you mean' messages."""
    return difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)


def unknown(kind: str, name: str, candidates: list[str]) -> UnknownNameError:
    """An error for an unknown ``name`` that lists the closest known ones (or the first ten)."""
    near = closest(name, candidates)
    hint = f"; closest: {', '.join(near)}" if near else f"; known: {', '.join(candidates[:10])}" + (
        ", ..." if len(candidates) > 10 else ""
    )
    return UnknownNameError(f"unknown {kind} {name!r}{hint}")
