"""A pytest plugin for the benchmarks (``-p benchmarks.timeline``): each process of a run, the
xdist controller and every worker, appends to ``$RF100VL_TIMELINE`` when its first test began
and its last one ended (``time role event`` lines, ``time.time()`` seconds), so a benchmark can
tell a run's start-up, its tests and its end apart (``benchmarks/test_scale_rf100vl.py``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest


def _write(config: pytest.Config, event: str) -> None:
    role = getattr(config, "workerinput", {}).get("workerid", "main")  # type: ignore[attr-defined]
    with Path(os.environ["RF100VL_TIMELINE"]).open("a", encoding="utf-8") as log:
        log.write(f"{time.time():.3f} {role} {event}\n")


class Timeline:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.started = False

    def pytest_runtest_logstart(self) -> None:
        if not self.started:
            self.started = True
            _write(self.config, "first")

    def pytest_runtest_logfinish(self) -> None:
        _write(self.config, "last")


def pytest_configure(config: pytest.Config) -> None:
    """In each process that runs tests (not the xdist controller, which hears of its workers')."""
    controller = not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"
    if os.environ.get("RF100VL_TIMELINE") and not controller:
        config.pluginmanager.register(Timeline(config), "rf100vl-timeline")


def phases(path: Path, start: float, end: float) -> tuple[float, float, float]:
    """(start-up: to the first test's start in any process, the tests: to the last one's end,
    the end: to the run's exit) of a run started at ``start`` and ended at ``end``."""
    events = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    first = min(float(t) for t, _, event in events if event == "first")
    last = max(float(t) for t, _, event in events if event == "last")
    return first - start, last - first, end - last
