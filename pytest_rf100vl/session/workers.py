"""pytest-xdist: ``pytest -n 8 --rf100vl-model ...`` runs the matrix on 8 workers, one per device.

- Under xdist's default ``--dist load`` (and ``loadgroup``) the plugin schedules by expected
  cost: the matrix is split into one part per worker as ``--rf100vl-shard`` splits it
  (``session/shard.py``: each pair's kind's cost, from the most to the least costly, each to
  the part with the least so far), a dataset's pairs kept in one part (so each dataset is
  loaded by one worker), and each worker runs its part in matrix order, so it loads each of
  its models once. Grouping by model instead left a worker idle whenever
  models differ in speed or number (other ``--dist`` modes are left as they are). A test that
  is not a pair is a group of its own.
- Worker ``gwI`` takes ``cuda:I`` (modulo the number of GPUs) when the device is ``auto`` or
  ``cuda`` and CUDA is there; an explicit ``cuda:N``, ``cpu`` or ``mps`` is kept.
- Every process of the session shares the controller's run id; workers append their rows to
  the one ``results.jsonl`` under a file lock and send the rows they reused from earlier runs
  (which ``results.jsonl`` holds once, as the runs that measured them wrote them) and what did
  not run (datasets not on disk, pairs that could not run or left out) to the controller, which
  tells the pairs that did not finish by the rows: those it planned with no row.
- The controller alone reads the run's rows back from ``results.jsonl``, in matrix order,
  writes ``summary.md`` and ``results.parquet``, runs the checks of means and prints the
  summary once; as each worker's pair ends, it reads the lines appended since the last pair
  (never the whole file again) and tells ``pytest_rf100vl_row_written`` of that pair's row (so
  an experiment tracker logs one run per session).
- The controller starts its workers before it imports what it does not need to (huggingface_hub
  for the Hub token, found once they are started, unless a report header is printed first), and
  lets each worker exit as soon as it has finished, so the workers' exit overlaps its writing of
  the results; it waits for them at its very end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf import redact
from rf100vl_hf.results.rows import JsonlTail
from rf100vl_hf.results.schema import ResultRow

from pytest_rf100vl.core.matrix_view import MatrixView
from pytest_rf100vl.core.pairs import Pair, pair_of, row_key
from pytest_rf100vl.core.stash import SESSION_KEY
from pytest_rf100vl.session import listeners
from pytest_rf100vl.session.shard import parts

RUN_ID = "rf100vl_run_id"
COMMAND = "rf100vl_command"
OUTPUT = "rf100vl"
REPORTED = ("missing", "errors", "left_out")
"""The session's records of what did not run that workers send to the controller."""
REUSED = "reused"
EXIT_TIMEOUT = 10.0
"""Seconds the controller waits for a finished worker to exit (as long as xdist waits)."""


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """Whether this process distributes the tests to xdist workers (and runs none itself)."""
    return (not is_worker(config) and config.pluginmanager.has_plugin("xdist")
            and config.getoption("dist", "no") != "no" and bool(config.getoption("tx", None)))


def worker_index(config: pytest.Config) -> int | None:
    """``I`` of worker ``gwI``; ``None`` outside a worker."""
    if not is_worker(config):
        return None
    match = re.fullmatch(r"gw(\d+)", str(config.workerinput.get("workerid", "")))  # type: ignore[attr-defined]
    return int(match.group(1)) if match else None


def shared_run_id(config: pytest.Config) -> str | None:
    """The controller's run id, in a worker."""
    return config.workerinput.get(RUN_ID) if is_worker(config) else None  # type: ignore[attr-defined]


def invocation(config: pytest.Config) -> list[str]:
    """The arguments pytest was started with, in every process: a worker has the controller's
    (its own command line is xdist's)."""
    if is_worker(config) and COMMAND in config.workerinput:  # type: ignore[attr-defined]
        return list(config.workerinput[COMMAND])  # type: ignore[attr-defined]
    return [str(arg) for arg in config.invocation_params.args]


def worker_device(config: pytest.Config, requested: str, resolved: str) -> str:
    """The device of this process: worker ``gwI`` takes ``cuda:I`` (modulo the GPUs) when
    ``requested`` is ``auto`` or ``cuda`` and resolved to CUDA; otherwise ``resolved``."""
    index = worker_index(config)
    if index is None or requested not in ("auto", "cuda") or resolved != "cuda":
        return resolved
    import torch

    return f"cuda:{index % max(1, torch.cuda.device_count())}"


def configure(config: pytest.Config) -> None:
    """Register the xdist hooks on the controller (scheduling by cost, the shared run id, the
    workers' reports)."""
    if is_controller(config):
        config.pluginmanager.register(XdistHooks(config), "rf100vl-xdist")


def part_of(nodeid: str, parts: dict[str, int]) -> str:
    """The scheduling scope of a test: the part of the matrix its pair is in (the ``[...]`` id
    ends its node id), else the test itself."""
    if nodeid.endswith("]") and "[" in nodeid:
        part = parts.get(nodeid[nodeid.index("[") + 1 : -1])
        if part is not None:
            return f"rf100vl-part-{part}"
    return nodeid


def cost_scheduling(config: pytest.Config, log: Any, pairs: list[Pair], cost: Callable[[Pair], float]) -> Any:
    """xdist's scope scheduling with one scope per worker: its part of the matrix by cost
    (see the module docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    class CostScheduling(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log: Any = None):
            super().__init__(config, log)
            split = parts(pairs, self.numnodes, cost, together=lambda pair: pair.dataset)
            self.parts = {pair.id: index for index, part in enumerate(split) for pair in part}

        def _split_scope(self, nodeid: str) -> str:
            return part_of(nodeid, self.parts)

    return CostScheduling(config, log)


class XdistHooks:
    """The plugin's hooks on the xdist controller."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.told: set[tuple[Any, Any, Any]] = set()
        """The rows ``pytest_rf100vl_row_written`` was told of, by :func:`row_key`."""
        self.tail: JsonlTail | None = None
        self.pairs: dict[tuple[Any, Any, Any], Pair] = {}
        """The session's pairs by :func:`row_key`, made at the first row (not again per pair)."""
        self.exiting: list[Any] = []
        """The gateways of the workers told to exit as they finished."""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A worker's test has ended: tell ``pytest_rf100vl_row_written`` of the rows of the run
        appended to ``results.jsonl`` since the last test (the worker appended its pair's row
        before)."""

        if report.when != "teardown" or SESSION_KEY not in self.config.stash:
            return
        if not self.config.hook.pytest_rf100vl_row_written.get_hookimpls():
            return
        state = self.config.stash[SESSION_KEY]
        self.tail = self.tail or JsonlTail(state.writer.jsonl)
        self.pairs = self.pairs or {pair.key: pair for pair in state.pairs}
        for row in self.tail.new_rows():
            key = row_key(row)
            if row.run.run_id == state.writer.run_id and key in self.pairs and key not in self.told:
                self.told.add(key)
                listeners.row_written(self.config, self.pairs[key], row)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist") not in ("load", "loadgroup") or SESSION_KEY not in config.stash:
            return None
        state = config.stash[SESSION_KEY]
        return cost_scheduling(config, log, state.pairs, state.cost_of(state.pairs))

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Any:
        """Once xdist has started the workers (in this hook): find the secrets left for later
        (:meth:`.MatrixSession._check_adapter_options`) while they start."""
        started = yield
        redact.ask_sources()
        return started

    def pytest_configure_node(self, node: Any) -> None:
        if SESSION_KEY in node.config.stash:
            node.workerinput[RUN_ID] = node.config.stash[SESSION_KEY].writer.run_id
            node.workerinput[COMMAND] = invocation(node.config)

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """A worker has finished (or died): take what it sent, and let a finished one exit now,
        so that its exit (a second or more: the interpreter's shutdown with datasets and
        pandas loaded) overlaps the controller's writing of the results, rather than
        precede it (xdist would end the workers only then); :meth:`pytest_unconfigure` waits
        for them."""
        if error is None:
            node.gateway.exit()  # no longer one of xdist's gateways: xdist's end does not wait for it
            self.exiting.append(node.gateway)
        output = getattr(node, "workeroutput", {}).get(OUTPUT)
        if output is None or SESSION_KEY not in node.config.stash:
            return
        state = node.config.stash[SESSION_KEY]
        for name in REPORTED:
            for key, value in output[name].items():
                getattr(state, name).setdefault(key, value)
        pairs = {pair.key: pair for pair in state.pairs}
        for column in output[REUSED]:  # the worker told no listener of them
            row = ResultRow.from_dict(column)
            state.reused.append(row)
            if row_key(row) in pairs:
                listeners.row_written(self.config, pairs[row_key(row)], row)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Leave no worker behind: wait for those that were told to exit early."""
        for gateway in self.exiting:
            gateway.join(EXIT_TIMEOUT)


def send_to_controller(config: pytest.Config, state: MatrixView) -> None:
    """In a worker: what the controller needs besides the rows it ran (which are in
    ``results.jsonl``): the rows it reused, and what did not run."""
    config.workeroutput[OUTPUT] = {  # type: ignore[attr-defined]
        **{name: dict(getattr(state, name)) for name in REPORTED}, REUSED: [row.to_dict() for row in state.reused],
    }


def rows_of_run(jsonl: Path, run_id: str, pairs: list[Pair], reused: list[ResultRow]) -> list[ResultRow]:
    """The rows of run ``run_id``, those in ``jsonl`` and those ``reused`` from earlier runs,
    in the order of ``pairs`` (the matrix), as a single process would have them."""
    from pytest_rf100vl.session.resume import earlier_rows

    order = {pair.key: index for index, pair in enumerate(pairs)}
    rows = [row for row in earlier_rows(jsonl.parent) if row.run.run_id == run_id] + reused
    return sorted(rows, key=lambda row: order.get(row_key(row), len(order)))


def planned_pairs(session: pytest.Session) -> list[Pair]:
    """The pairs this process was to run (after ``-k`` and other deselection)."""
    return [pair for pair in (pair_of(item) for item in session.items) if pair is not None]
