"""Hooks the plugin calls, for a ``conftest.py`` or another plugin to implement.

- :func:`pytest_rf100vl_make_adapter`: build a model's adapter (try a model without
  publishing an entry point);
- :func:`pytest_rf100vl_result_row`: add columns to a pair's results row before it is written;
- :func:`pytest_rf100vl_row_written`: act on each row once it is in ``results.jsonl`` (log it
  to an experiment tracker as the run goes);
- :func:`pytest_rf100vl_results_written`: act on the results folder once the session has
  written it (publish it, archive it, notify someone).

The ``wandb`` and ``mlflow`` report keys are implementations of the last two
(``session/trackers.py``).

A row is a :class:`~rf100vl_hf.results.schema.ResultRow`: read it by section (``row.scores.ap``,
``row.model.checkpoint``, ``row.data.dataset``, ``row.throughput.images_per_s``); it is also a
read-only mapping of its columns as ``results.jsonl`` holds them (``row["ap"]``,
``row.get("ap")``, ``dict(row)``), so a hook written against dict rows keeps working.

Benchmark kinds are not hooks: they register in the ``rf100vl.kinds`` entry-point group
(``docs/architecture.md`` shows a complete one).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rf100vl_hf.results.schema import ResultRow
    from rf100vl_hf.specs import ModelSpec

    from pytest_rf100vl.adapters.base import Detector
    from pytest_rf100vl.core.pairs import Pair


@pytest.hookspec(firstresult=True)
def pytest_rf100vl_make_adapter(
    config: pytest.Config, spec: ModelSpec, device: str, dtype: str, options: dict[str, str]
) -> "Detector | None":
    """Build the model for ``spec``, or return ``None`` to leave it to the adapter registry.

    ``spec`` is the model as asked for, parsed (``spec.name``, ``spec.checkpoint``: ``None``
    when none was given, ``spec.text``: as written); ``options`` are the
    ``--rf100vl-adapter-option`` values for this model (strings; an implementation may leave
    the argument out of its signature). This lets a project try a
    model from its ``conftest.py`` without publishing an entry point in the
    ``rf100vl.adapters`` group. The model needs only ``set_task`` and ``predict``
    (``docs/your-model.md``); the plugin gives it caching, resume, rows and throughput.
    Example::

        import numpy as np

        from pytest_rf100vl.adapters.base import Detections

        class Everywhere:
            def set_task(self, task):
                self.classes = task.classes

            def predict(self, batch):
                return [Detections(np.array([[0.0, 0.0, *item.image.size]]), np.ones(1), np.zeros(1, dtype=int))
                        for item in batch]

        def pytest_rf100vl_make_adapter(config, spec, device, dtype):
            if spec.name == "everywhere":
                return Everywhere()
    """


def pytest_rf100vl_result_row(config: pytest.Config, pair: "Pair", row: "ResultRow") -> dict[str, Any] | None:
    """Columns to add to ``pair``'s results row, returned as a dict (``row`` is a copy: changing
    it changes nothing), before it is written to ``results.jsonl``, the parquet file and
    pytest-benchmark's JSON. Every implementation's columns are added (they are the row's
    ``extra`` columns); a column the plugin already wrote cannot be replaced (the pair errors).
    Example, recording the machine and the cluster job::

        import os, socket

        def pytest_rf100vl_result_row(config, pair, row):
            return {"host": socket.gethostname(), "job": os.environ.get("SLURM_JOB_ID")}
    """


def pytest_rf100vl_row_written(config: pytest.Config, pair: "Pair", row: "ResultRow") -> None:
    """Called once for each row of the session (run or reused) as soon as it is in
    ``results.jsonl``, in the process that writes the summary: under pytest-xdist the controller,
    which reads its workers' rows back as their pairs end. ``row`` is a copy, scrubbed of the
    session's secrets. An exception here is a warning; the row stays as written. Example,
    telling a chat channel::

        def pytest_rf100vl_row_written(config, pair, row):
            post(f"{pair.id}: AP {row.scores.ap}")
    """


def pytest_rf100vl_results_written(config: pytest.Config, folder: Path, rows: "list[ResultRow]") -> None:
    """Called once the session has written ``summary.md`` and ``results.parquet`` into the
    results ``folder``; ``rows`` are this session's rows. An exception here is reported as a
    warning line of the summary; it never changes the results already written. Example,
    copying the folder to shared storage::

        import shutil

        def pytest_rf100vl_results_written(config, folder, rows):
            shutil.copytree(folder, f"/mnt/archive/{rows[0].run.run_id}", dirs_exist_ok=True)
    """
