"""Live progress of a matrix run in pytest's terminal.

Long steps (preparing a dataset, embedding cut-outs, building mosaics, inference over a
pair's images) run inside fixtures and tests, where pytest captures output: a tqdm bar
would be hidden. While a pair's test runs, this plugin object follows every progress bar
the library and the inference loop draw (:func:`rf100vl_hf.progress.follow`) and shows one
line per step through pytest's terminal reporter, with what is done, the rate and the time
left; on a terminal the line updates in place, elsewhere (CI logs, pipes) a line is printed
at most every :data:`PLAIN_INTERVAL_S` seconds and when the step ends. A bar inside the step's
bar (a chat model's bar over the classes it asks about each image) is no step of its own: on a
terminal it is shown after the step's line, and it never restarts the step's rate or prints a
line when it ends. INFO lines of the
``rf100vl_hf`` logger (prepare and mosaic builds starting and finishing) are shown live too.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from rf100vl_hf.progress import follow, logger
from rf100vl_hf.redact import scrub

from pytest_rf100vl.core.pairs import pair_of

PREFIX = "rf100vl: "
TTY_INTERVAL_S = 0.1
PLAIN_INTERVAL_S = 5.0
PLUGIN_NAME = "rf100vl-live"


@dataclass
class Step:
    """One followed progress bar: its description, size and how far it got."""

    description: str
    total: float | None
    started: float
    done: float = 0
    shown: float | None = None  # when its line was last written (or, for plain lines, first seen)
    inner: str = ""  # the bar inside it, as "DESC: DONE/TOTAL", while it runs

    def rate(self, now: float) -> float | None:
        elapsed = now - self.started
        return self.done / elapsed if elapsed > 0 and self.done else None

    @property
    def finished(self) -> bool:
        return self.total is not None and self.done >= self.total

    def line(self, now: float) -> str:
        """``DESC: DONE/TOTAL (RATE/s, ETA T)`` while it runs, ``DESC: DONE/TOTAL in T (RATE/s)`` at the end."""
        rate = self.rate(now)
        count = _number(self.done) + ("" if self.total is None else f"/{_number(self.total)}")
        per_s = "" if rate is None else f"{rate:.1f}/s"
        if self.finished:
            return f"{self.description}: {count} in {_duration(now - self.started)}" + (f" ({per_s})" if per_s else "")
        left = f", ETA {_duration((self.total - self.done) / rate)}" if rate and self.total is not None else ""
        return f"{self.description}: {count}" + (f" ({per_s}{left})" if per_s else "") + (
            f"; {self.inner}" if self.inner else "")


def _number(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class LogLines(logging.Handler):
    """Shows the ``rf100vl_hf`` logger's records as live lines."""

    def __init__(self, live: "LiveProgress"):
        super().__init__(logging.INFO)
        self.live = live

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
            self.live.message(level + record.getMessage())
        except Exception:  # a log line must never break a run
            self.handleError(record)


class LiveProgress:
    """The plugin object (registered for matrix runs) that follows a pair's test."""

    def __init__(self, config: pytest.Config, clock: Any = time.monotonic):
        self.config = config
        self.clock = clock
        self.step: Step | None = None
        self.updating = False  # a tty line is being rewritten in place
        self.wrote = False  # lines were written since pytest last wrote its own

    # -- pytest hooks ---------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        if pair_of(item) is None:
            return (yield)
        with follow(self.advance), self.logging():
            try:
                return (yield)
            finally:
                self.end_step()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Before pytest writes a test's outcome letter, put back the line prefix (the file
        name) that the live lines pushed away."""
        if not self.wrote or not (report.when == "call" or report.failed or report.skipped):
            return
        self.end_step()
        self.wrote = False
        reporter = self.reporter
        if reporter is not None and self.config.get_verbosity(pytest.Config.VERBOSITY_TEST_CASES) <= 0:
            with self._terminal():
                reporter.write_fspath_result(report.nodeid, "")

    @contextlib.contextmanager
    def logging(self) -> Iterator[None]:
        """The ``rf100vl_hf`` logger's INFO lines, shown live (its level is restored afterwards)."""
        handler = LogLines(self)
        level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)

    # -- following ------------------------------------------------------------------
    def advance(self, description: str, done: float, total: float | None, depth: int = 0) -> None:
        """The follower of every progress bar: start, update or end the current step's line
        (a bar inside another, ``depth`` > 0, only updates what is shown after it)."""
        now = self.clock()
        step = self.step
        if depth:
            if step is not None:
                finished = total is not None and done >= total
                step.inner = "" if finished else f"{description}: {_number(done)}" + (
                    "" if total is None else f"/{_number(total)}")
                if self.tty and (step.shown is None or now - step.shown >= TTY_INTERVAL_S):
                    self.show(step.line(now))
                    step.shown = now
            return
        if step is None or step.description != description or done < step.done or step.finished:
            self.end_step()
            step = self.step = Step(description or "working", total, now)
        step.done, step.total = done, total
        tty = self.tty
        if step.finished:
            self.end_step()
        elif step.shown is None and not tty:
            step.shown = now  # plain lines only after the first interval: a quick step prints once, at its end
        elif step.shown is None or now - step.shown >= (TTY_INTERVAL_S if tty else PLAIN_INTERVAL_S):
            self.show(step.line(now))
            step.shown = now

    def end_step(self) -> None:
        """Print the current step's final line and forget it."""
        step, self.step = self.step, None
        if step is not None and step.done:
            self.message(step.line(self.clock()), replace=True)

    # -- writing --------------------------------------------------------------------
    @property
    def reporter(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    @property
    def tty(self) -> bool:
        reporter = self.reporter
        return bool(reporter is not None and reporter.isatty())

    @contextlib.contextmanager
    def _terminal(self) -> Iterator[Any]:
        """The terminal reporter, with pytest's capture suspended (a test's output is captured)."""
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            yield self.reporter

    def show(self, line: str) -> None:
        """A line that updates in place on a terminal (a plain line elsewhere), scrubbed."""
        line = scrub(line)
        with self._terminal() as reporter:
            if reporter is None:
                return
            self.wrote = True
            if not self.tty:
                reporter.write_line(PREFIX + line)
                return
            if not self.updating:
                reporter.ensure_newline()
                self.updating = True
            reporter.rewrite(PREFIX + line, erase=True, flush=True)

    def message(self, line: str, replace: bool = False) -> None:
        """A line of its own, after the line updating in place (or over it: ``replace``), scrubbed."""
        line = scrub(line)
        with self._terminal() as reporter:
            if reporter is None:
                return
            self.wrote = True
            if self.updating:
                self.updating = False
                if replace:
                    reporter.rewrite(PREFIX + line, erase=True)
                    reporter.line("")
                    return
                reporter.line("")
            reporter.write_line(PREFIX + line)
