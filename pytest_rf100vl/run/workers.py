"""pytest-xdist: ``pytest -n 8 --rf100vl-model ...`` runs the matrix on 8 workers, one per device.

- The plugin turns xdist's default ``--dist load`` into ``loadgroup`` and marks each pair
  with its model's ``xdist_group``, so all of a model's pairs go to one worker and the model
  is loaded once (other ``--dist`` modes are left as given).
- Worker ``gwI`` takes ``cuda:I`` (modulo the number of GPUs) when the device is ``auto`` or
  ``cuda`` and CUDA is there; an explicit ``cuda:N``, ``cpu`` or ``mps`` is kept.
- Every process of the session shares the controller's run id; workers append their rows to
  the one ``results.jsonl`` under a file lock and send what did not run (datasets not on
  disk, pairs that could not run, left out or unfinished) to the controller.
- The controller alone reads the run's rows back from ``results.jsonl``, in matrix order,
  writes ``summary.md`` and ``results.parquet``, runs the checks of means and prints the
  summary once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rf100vl.collect.collection import pair_of

if TYPE_CHECKING:
    from pytest_rf100vl.collect.selection import Pair
    from pytest_rf100vl.run.session import MatrixSession

RUN_ID = "rf100vl_run_id"
OUTPUT = "rf100vl"
REPORTED = ("missing", "errors", "left_out")
"""The session's records of what did not run that workers send to the controller."""


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


def worker_device(config: pytest.Config, requested: str, resolved: str) -> str:
    """The device of this process: worker ``gwI`` takes ``cuda:I`` (modulo the GPUs) when
    ``requested`` is ``auto`` or ``cuda`` and resolved to CUDA; otherwise ``resolved``."""
    index = worker_index(config)
    if index is None or requested not in ("auto", "cuda") or resolved != "cuda":
        return resolved
    import torch

    return f"cuda:{index % max(1, torch.cuda.device_count())}"


def configure(config: pytest.Config) -> None:
    """Group pairs by model under xdist (``load`` becomes ``loadgroup``) and share the run id."""
    if not config.pluginmanager.has_plugin("xdist"):
        return
    if is_controller(config) and config.getoption("dist", "no") == "load":
        config.option.dist = "loadgroup"
    config.pluginmanager.register(XdistHooks(), "rf100vl-xdist")


class XdistHooks:
    """The plugin's xdist hooks (registered only when xdist is installed)."""

    @pytest.hookimpl(tryfirst=True)  # before xdist's worker renames the grouped node ids
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            pair = pair_of(item)
            if pair is not None:
                item.add_marker(pytest.mark.xdist_group(name=pair.model))

    def pytest_configure_node(self, node: Any) -> None:
        from pytest_rf100vl.fixtures import SESSION_KEY

        if SESSION_KEY in node.config.stash:
            node.workerinput[RUN_ID] = node.config.stash[SESSION_KEY].writer.run_id

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        from pytest_rf100vl.fixtures import SESSION_KEY

        output = getattr(node, "workeroutput", {}).get(OUTPUT)
        if output is None or SESSION_KEY not in node.config.stash:
            return
        state = node.config.stash[SESSION_KEY]
        for name in REPORTED:
            for key, value in output[name].items():
                getattr(state, name).setdefault(key, value)
        state.unfinished.update(output["unfinished"])


def send_to_controller(config: pytest.Config, state: "MatrixSession", unfinished: list[str]) -> None:
    """In a worker: what the controller needs besides the rows (which are in ``results.jsonl``)."""
    config.workeroutput[OUTPUT] = {  # type: ignore[attr-defined]
        **{name: dict(getattr(state, name)) for name in REPORTED}, "unfinished": unfinished,
    }


def rows_of_run(jsonl: Path, run_id: str, pairs: list["Pair"]) -> list[dict[str, Any]]:
    """The rows of run ``run_id`` in ``jsonl``, in the order of ``pairs`` (the matrix), as a
    single process would have them."""
    from pytest_rf100vl.run.resume import earlier_rows

    order = {(pair.model, pair.dataset): index for index, pair in enumerate(pairs)}
    rows = [row for row in earlier_rows(jsonl.parent) if row.get("run_id") == run_id]
    return sorted(rows, key=lambda row: order.get((row.get("spec"), row.get("dataset")), len(order)))


def planned_pairs(session: pytest.Session) -> list["Pair"]:
    """The pairs this process was to run (after ``-k`` and other deselection)."""
    return [pair for pair in (pair_of(item) for item in session.items) if pair is not None]
