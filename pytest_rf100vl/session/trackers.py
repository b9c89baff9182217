"""Experiment trackers, optional: the report key ``wandb: PROJECT`` (ini ``rf100vl_wandb``) logs the
session to Weights & Biases, ``mlflow: URI`` (``rf100vl_mlflow``) to MLflow, each as one run named by the session's run id.

- **As each row is written** (run or reused; under pytest-xdist as the controller reads a
  worker's row back): its numeric columns as metrics at step N (the session's N-th row, from 0),
  and the whole row (W&B: a line of the incremental table ``rows``, with the row as JSON in its
  ``row`` column; MLflow: the artifact ``rows/NNNN.json``).
- **When the session has written its results**: the headline tables of the summary
  (:func:`rf100vl_hf.results.tables.summary_tables`: RF100-VL's AP by dataset and domain,
  UOUO's Table 1; W&B tables ``tables/<name>``, MLflow ``tables/<name>.json``), the figures of
  ``rf100vl-hf results plot`` (``plots/``), and ``summary.md`` and ``results.parquet``; then
  the run is finished.

Both are one implementation of the plugin's own hooks (``pytest_rf100vl_row_written``,
``pytest_rf100vl_results_written``) on :class:`SessionTrackers`, over a small
:class:`Tracker` protocol, one class per library. A library is imported only when its option
is given; one that is not installed is a usage error naming the pip install
(``pip install "rf100vl-hf[wandb]"``, ``"rf100vl-hf[mlflow]"``). Each library reads its own
settings from its environment (``WANDB_MODE=offline``, ``WANDB_DIR``, ``WANDB_ENTITY``,
``MLFLOW_EXPERIMENT_NAME``, credentials).

Everything logged passes the session's scrubber: rows come scrubbed from the hook, the tables
and figures are made from scrubbed rows, the files were written scrubbed, the run's settings
are recorded as the rows record options (URLs without credentials), and so is the command line
W&B records of the process. A tracker that fails (not
logged in, server down) logs nothing more; the session goes on, the results folder keeps
everything, and the summary ends with a warning line saying what failed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from rf100vl_hf import redact
from rf100vl_hf.redact import public_argument, public_value, scrub
from rf100vl_hf.results.folder import PARQUET, SUMMARY
from rf100vl_hf.results.plots import write_plots
from rf100vl_hf.results.schema import ResultRow
from rf100vl_hf.results.tables import summary_tables

from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.core.pairs import Pair, row_key
from pytest_rf100vl.core.stash import SESSION_KEY
from pytest_rf100vl.session.workers import is_worker

if TYPE_CHECKING:
    from rf100vl_hf.results.tables import Table

PLUGIN_NAME = "rf100vl-trackers"
ROW_FIELDS = ("run_id", "benchmark", "spec", "dataset", "split", "prompt", "seed", "smoke", "check")
"""The columns of a W&B ``rows`` table line before ``row`` (the whole row, as JSON)."""
CREDENTIALS = ("WANDB_API_KEY", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "DATABRICKS_TOKEN")
"""Variables whose values the trackers' libraries send: masked like every secret of the session."""
EXPERIMENT = "rf100vl"
"""The MLflow experiment of the runs, unless ``MLFLOW_EXPERIMENT_NAME`` names another."""


class TrackerWarning(UserWarning):
    """An experiment tracker failed; the results folder holds everything."""


def numbers(row: dict[str, Any]) -> dict[str, float]:
    """The finite numeric columns of a row (flags and nested values left out): its metrics."""
    return {key: float(value) for key, value in row.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}


def slug(text: str) -> str:
    """A table's title as a key both libraries accept."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.").lower() or "table"


class Tracker(ABC):
    """One experiment tracker's run of the session."""

    name: ClassVar[str]
    option: ClassVar[str]
    module: ClassVar[str]
    """The module the library installs, found before the session runs."""
    extra: ClassVar[str]
    """The optional extra of rf100vl-hf that installs it."""

    def __init__(self, target: str):
        self.target = target

    @classmethod
    def check_installed(cls) -> None:
        """A usage error naming the pip install when the library is missing."""
        if importlib.util.find_spec(cls.module) is None:
            raise pytest.UsageError(
                f"{cls.option} needs the {cls.module} package: pip install \"rf100vl-hf[{cls.extra}]\""
            )

    @abstractmethod
    def start(self, run_name: str, settings: dict[str, Any]) -> None:
        """Open the run, recording the session's settings."""

    @abstractmethod
    def log_row(self, step: int, row: dict[str, Any]) -> None:
        """Log the session's ``step``-th row (scrubbed)."""

    @abstractmethod
    def log_results(self, folder: Path, tables: list["Table"], plots: list[Path]) -> None:
        """Log the summary's tables, the figures, and ``summary.md`` and ``results.parquet`` of ``folder``."""

    @abstractmethod
    def finish(self, completed: bool) -> None:
        """Close the run (``completed``: the session wrote its results; otherwise it stopped early)."""


def _results_files(folder: Path) -> list[Path]:
    return [path for path in (folder / SUMMARY, folder / PARQUET) if path.is_file()]


@contextlib.contextmanager
def _public_command_line() -> Iterator[None]:
    """``sys.argv`` as rows record the command line (:func:`~rf100vl_hf.redact.public_argument`
    of each word) while W&B starts its run: W&B writes the process's arguments, which it reads
    from ``sys.argv`` and no setting overrides, into the run's metadata."""
    kept = sys.argv
    sys.argv = [*kept[:1], *(public_argument(word) for word in kept[1:])]
    try:
        yield
    finally:
        sys.argv = kept


class WandbTracker(Tracker):
    """A Weights & Biases run in project ``target`` (``WANDB_MODE=offline`` keeps it on disk)."""

    name = "wandb"
    option = "rf100vl_wandb"
    module = "wandb"
    extra = "wandb"

    def start(self, run_name: str, settings: dict[str, Any]) -> None:
        import wandb

        self.wandb = wandb
        with _public_command_line():
            self.run = wandb.init(project=self.target, name=run_name, config=settings, reinit="create_new",
                                  settings=wandb.Settings(console="off", save_code=False, silent=True))
        self.rows = wandb.Table(columns=[*ROW_FIELDS, "row"], log_mode="INCREMENTAL", allow_mixed_types=True)
        self.steps = 0

    def log_row(self, step: int, row: dict[str, Any]) -> None:
        self.rows.add_data(*(row.get(field) for field in ROW_FIELDS), json.dumps(row, default=str))
        self.run.log({**numbers(row), "rows": self.rows}, step=step)
        self.steps = step + 1

    def log_results(self, folder: Path, tables: list["Table"], plots: list[Path]) -> None:
        logged: dict[str, Any] = {f"tables/{slug(table.title)}": self.wandb.Table(
            columns=table.header, data=table.rows, allow_mixed_types=True) for table in tables}
        logged.update({f"plots/{plot.stem}": self.wandb.Image(str(plot)) for plot in plots})
        if logged:
            self.run.log(logged, step=self.steps)
        for path in _results_files(folder):  # copied: a later run of the folder rewrites them
            copy = Path(self.run.dir) / path.name
            shutil.copyfile(path, copy)
            self.run.save(str(copy), base_path=self.run.dir, policy="now")

    def finish(self, completed: bool) -> None:
        self.run.finish(exit_code=0 if completed else 1)


class MlflowTracker(Tracker):
    """An MLflow run at tracking URI ``target`` (``http(s)://`` server, ``sqlite:///``, ``file:``)."""

    name = "mlflow"
    option = "rf100vl_mlflow"
    module = "mlflow"
    extra = "mlflow"

    def start(self, run_name: str, settings: dict[str, Any]) -> None:
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=self.target)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        self.run_id = self.client.create_run(experiment_id, run_name=run_name,
                                             tags={"rf100vl.run_id": run_name}).info.run_id
        self.client.log_dict(self.run_id, settings, "session.json")

    def log_row(self, step: int, row: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in numbers(row).items()]
        self.client.log_batch(self.run_id, metrics=metrics)
        self.client.log_dict(self.run_id, row, f"rows/{step:04d}.json")

    def log_results(self, folder: Path, tables: list["Table"], plots: list[Path]) -> None:
        for table in tables:
            self.client.log_dict(self.run_id, {"title": table.title, "columns": table.header, "data": table.rows},
                                 f"tables/{slug(table.title)}.json")
        for plot in plots:
            self.client.log_artifact(self.run_id, str(plot), "plots")
        for path in _results_files(folder):
            self.client.log_artifact(self.run_id, str(path))

    def finish(self, completed: bool) -> None:
        self.client.set_terminated(self.run_id, "FINISHED" if completed else "KILLED")


TRACKERS: dict[str, type[Tracker]] = {"wandb": WandbTracker, "mlflow": MlflowTracker}
"""Each tracker by its option's field of the report configuration."""


def _public(value: Any) -> Any:
    """A recorded value: every text in it made public (:func:`~rf100vl_hf.redact.public_value`)."""
    if isinstance(value, str):
        return public_value(value)
    if isinstance(value, list):
        return [_public(item) for item in value]
    return value


def session_settings(config: RunConfig, run_id: str, command: str) -> dict[str, Any]:
    """What a run records of the session: its id, command line and every option given, as
    rows record options (URLs without credentials, secrets masked)."""
    options = json.loads(json.dumps(config.given(), default=str))  # paths, specs as text; tuples as lists
    return {"run_id": run_id, "command": scrub(command),
            "options": {dest: _public(value) for dest, value in options.items()}}


class SessionTrackers:
    """The session's trackers, as a pytest plugin: the plugin's own hooks feed them."""

    def __init__(self, trackers: list[Tracker]):
        self.trackers = trackers
        self.failures: dict[str, str] = {}
        self.opened: list[Tracker] = []
        self.logged: list[tuple[Any, Any, Any]] = []
        self.started = False
        self.finished = False

    def _failed(self, tracker: Tracker, doing: str, exc: Exception) -> None:
        """Record (scrubbed) and warn that ``tracker`` failed; it logs nothing more."""
        first = (str(exc).strip().splitlines() or [""])[0]
        self.failures[tracker.name] = scrub(f"{tracker.name} ({tracker.option}): {doing} failed: "
                                            f"{type(exc).__name__}: {first}")
        warnings.warn(TrackerWarning(f"rf100vl: {self.failures[tracker.name]}; it logs nothing more, "
                                     "the results folder keeps everything"), stacklevel=3)

    def _each(self, doing: str, action: Callable[[Tracker], None]) -> None:
        """``action(tracker)`` for each tracker that has not failed; a failure stops that tracker."""
        for tracker in self.trackers:
            if tracker.name in self.failures:
                continue
            try:
                action(tracker)
            except Exception as exc:  # a tracker's failure must not cost the results
                self._failed(tracker, doing, exc)

    def _start(self, config: pytest.Config) -> None:
        if self.started:
            return
        self.started = True
        state = config.stash[SESSION_KEY]
        settings = session_settings(state.config, state.writer.run_id, state.command)

        def start(tracker: Tracker) -> None:
            tracker.start(state.writer.run_id, settings)
            self.opened.append(tracker)

        self._each("starting its run", start)

    def _log(self, row: ResultRow, pair_id: str) -> None:
        key = row_key(row)
        if key in self.logged:
            return
        self.logged.append(key)
        step, columns = len(self.logged) - 1, row.to_dict()
        self._each(f"logging the row of {pair_id}", lambda tracker: tracker.log_row(step, columns))

    def _finish(self, completed: bool) -> None:
        """Close every run that was opened, a failed tracker's too (as not completed)."""
        if self.finished:
            return
        self.finished = True
        for tracker in self.opened:
            failed = tracker.name in self.failures
            try:
                tracker.finish(completed and not failed)
            except Exception as exc:  # a tracker's failure must not cost the results
                if not failed:
                    self._failed(tracker, "finishing its run", exc)

    def pytest_rf100vl_row_written(self, config: pytest.Config, pair: Pair, row: ResultRow) -> None:
        self._start(config)
        self._log(row, pair.id)

    def pytest_rf100vl_results_written(self, config: pytest.Config, folder: Path, rows: list[ResultRow]) -> None:
        """Log any row not logged yet, the tables and figures and the results files, then finish;
        raise, for the summary's warning line, when a tracker failed at any point."""

        self._start(config)
        rows = [row.scrubbed() for row in rows]
        for row in rows:
            self._log(row, f"{row.spec}-{row.data.dataset}")
        tables = summary_tables(rows)
        with tempfile.TemporaryDirectory(prefix="rf100vl-plots-") as scratch:
            plots = write_plots(rows, Path(scratch), confusion=False) if rows else []  # the folder has the matrices
            self._each("logging the results", lambda tracker: tracker.log_results(Path(folder), tables, plots))
        self._finish(completed=True)
        if self.failures:
            raise RuntimeError("; ".join(self.failures.values()) + f" (the results folder {folder} has everything)")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """A session that stopped before writing its results still closes its runs."""
        self._finish(completed=False)


def configure(config: pytest.Config, run: RunConfig) -> None:
    """Register the trackers the options ask for (in the process that writes the summary: not
    in a pytest-xdist worker); a missing library is a usage error naming the pip install."""

    chosen = [cls(getattr(run.report, name)) for name, cls in TRACKERS.items() if getattr(run.report, name)]
    if not chosen:
        return
    for tracker in chosen:
        tracker.check_installed()
        if "://" in tracker.target:
            redact.remember_url(tracker.target)
    redact.remember(*(os.environ.get(name) for name in CREDENTIALS))
    if not is_worker(config):
        config.pluginmanager.register(SessionTrackers(chosen), PLUGIN_NAME)
