"""Run a call that must end within seconds, so that a regression to a hang fails its test
instead of stalling the suite (there is no pytest-timeout here)."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def _release_fifos(folder: Path) -> None:
    """Open every FIFO under ``folder`` for writing and close it: a reader blocked opening one
    goes on and reads an empty file, so the hung call ends."""
    for path in folder.rglob("*"):
        if stat.S_ISFIFO(path.lstat().st_mode):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: nobody is reading it
                    raise


def within(seconds: float, call: Callable[[], T], fifos_under: Path | None = None) -> T:
    """``call()``'s result or exception; a test failure when it is still running after ``seconds``.

    A call that hangs on a FIFO under ``fifos_under`` is then released, as often as it opens
    one again, for up to ``seconds`` more, so that its thread ends and holds no lock the
    tests after it need.
    """
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:  # handed to the caller's thread as it is
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        release_until = time.monotonic() + seconds
        while fifos_under is not None and thread.is_alive() and time.monotonic() < release_until:
            _release_fifos(fifos_under)
            thread.join(0.05)
        pytest.fail(f"still running after {seconds:g} s: a hang")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]
