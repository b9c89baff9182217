"""Adapter code whose failure costs a whole pair, not one image.

The inference loop isolates ``predict`` and ``ground`` per image (a raise costs that image).
What cannot be isolated, ``set_task`` raising and ``sys.exit`` anywhere in the adapter, is
turned into an :class:`AdapterError`: the pair errors with the reason, the summary lists it
under the pairs that could not run, and the next pairs run normally (a ``SystemExit`` left
to pytest would break the next pair's fixtures).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class AdapterError(RuntimeError):
    """The adapter failed in a way that costs its whole pair."""


@contextlib.contextmanager
def adapter_call(
    what: str, errors: tuple[type[Exception], ...] = (Exception,), passing: tuple[type[Exception], ...] = (ValueError,)
) -> Iterator[None]:
    """Run adapter code: ``sys.exit`` and any of ``errors`` become an :class:`AdapterError`
    naming ``what`` (``errors=()``: only ``sys.exit``). ``passing`` errors keep their own
    handling: a ``ValueError`` is a task the adapter refuses (e.g. a prompt mode it lacks)."""
    try:
        yield
    except SystemExit as exc:
        raise AdapterError(f"{what} called sys.exit({exc.code!r})") from exc
    except passing:
        raise
    except errors as exc:
        raise AdapterError(f"{what} raised {type(exc).__name__}: {exc}") from exc


def first_error_line(first_error: str) -> str:
    """``image ID (NAME): ExceptionType: message`` from a row's ``first_error`` traceback."""
    lines = [line for line in first_error.strip().splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1].strip()}"
