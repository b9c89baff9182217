"""The state of one pytest session's matrix: its benchmark kinds, loaded models and datasets,
finished runs, and the results folder. It lives in ``config.stash``, so in-process pytest
runs do not share it. It never names a kind: each pair runs through the same stages
(:mod:`.stages`), its kind loading the split and scoring the answers."""

from __future__ import annotations

import copy
import functools
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from rf100vl_hf import redact
from rf100vl_hf.devices import resolve_device
from rf100vl_hf.errors import DataError
from rf100vl_hf.results.folder import ResultsWriter
from rf100vl_hf.results.rows import with_measured_throughput
from rf100vl_hf.results.schema import BENCHMARK_FIELDS, ResultRow
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.adapters import registry
from pytest_rf100vl.adapters.model import Model, hosted
from pytest_rf100vl.core.config import RunConfig
from pytest_rf100vl.core.minimums import ANY_TARGET, Metric, Rule
from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.engine.columns import command_line
from pytest_rf100vl.engine.guard import adapter_call
from pytest_rf100vl.engine.runner import LoopOptions, Rounds
from pytest_rf100vl.kinds.base import BenchmarkKind, Report, Split, SplitIdentity
from pytest_rf100vl.session import listeners, resume, workers
from pytest_rf100vl.session.selection import matrix
from pytest_rf100vl.session.shard import shard
from pytest_rf100vl.session.stages import PairRun, checked, run_pair, thresholds
from pytest_rf100vl.session.thresholds import read_thresholds
from pytest_rf100vl.session.verdict import too_many_failed_images

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Entry


class MatrixSession:
    """Loads each model once for its datasets (releasing it when the next model starts and at
    the end) and each dataset once per session, runs pairs once, and records them."""

    def __init__(self, pytest_config: pytest.Config, config: RunConfig, kinds: list[BenchmarkKind]):
        self.pytest_config = pytest_config
        self.config = config
        self.kinds = {kind.name: kind for kind in kinds}
        self._entries: dict[str, Entry | Exception] = {}
        self.pairs: list[Pair] = self._shard(matrix(config, kinds, self.entry))
        self.rules: list[Rule] = self._rules()
        self._check_adapter_options()
        run_id = workers.shared_run_id(pytest_config) or (
            datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
        )
        self.writer = ResultsWriter(config.report.results, run_id)
        loop = config.loop
        self.loop = LoopOptions(loop.warmup_batches, self._cache_folder(), benchmark_rounds(pytest_config),
                                samples=config.report.log_samples)
        self.runs: dict[Pair, PairRun] = {}
        self.reused: list[ResultRow] = []
        """The rows this process reused (not in ``results.jsonl``: the rows they copy are)."""
        self._earlier: resume.EarlierRows | None = None
        self.missing: dict[str, str] = {}  # dataset -> how to get it
        self.errors: dict[str, str] = {}  # pair id -> why it could not run
        self.left_out: dict[str, str] = {}  # pair id -> why the model does not answer it
        self._device: str | None = None
        self._model: tuple[ModelSpec, Model | Exception] | None = None
        self._splits: dict[str, Split] = {}
        self._identities: dict[str, SplitIdentity | None] = {}

    @functools.cached_property
    def command(self) -> str:
        """The command line as rows record it, scrubbed (so made when first asked for: the
        xdist controller finds the Hub token only after starting its workers)."""
        return command_line(workers.invocation(self.pytest_config))

    def entry(self, spec: ModelSpec) -> "Entry | None":
        """The registry entry of ``spec``'s model, resolved once; ``None`` when the registry does
        not know it (a ``pytest_rf100vl_make_adapter`` hook makes it) or its module fails to
        import (its pairs then fail with the reason when the model loads)."""
        if spec.name not in self._entries:
            try:
                self._entries[spec.name] = registry.entry(spec.name)
            except Exception as exc:  # any failure to import is reported on the model's pairs
                self._entries[spec.name] = exc
        found = self._entries[spec.name]
        return None if isinstance(found, Exception) else found

    def _shard(self, pairs: list[Pair]) -> list[Pair]:
        """This session's part of the matrix under ``--rf100vl-shard I/N`` (all of it without)."""
        chosen = self.config.matrix.shard
        if chosen is None:
            return pairs
        return shard(pairs, *chosen, self.cost_of(pairs))

    def cost_of(self, pairs: list[Pair]) -> Callable[[Pair], float]:
        """Each pair's expected cost, by its kind's :meth:`BenchmarkKind.cost` of its dataset
        (asked once per dataset): what shards and xdist workers are balanced on."""
        costs = {dataset: self.kinds[kind].cost(dataset) for dataset, kind in {(p.dataset, p.kind) for p in pairs}}
        return lambda pair: costs[pair.dataset]

    def _cache_folder(self) -> Path | None:
        """The answer cache folder: the loop key ``cache: DIR``, none with ``off``, by default
        ``answers`` in the results folder."""
        chosen = self.config.loop.cache
        if chosen is None:
            return Path(self.config.report.results) / "answers"
        return None if chosen == "off" else Path(chosen)  # resolved where it was given (a file's folder...)

    def _check_adapter_options(self) -> None:
        """An option a model's adapter does not declare, or a value it refuses, is a usage error
        now, before any model loads; and the secrets the options hold or lead to are told to
        the session's scrubber before anything is printed (:mod:`rf100vl_hf.redact`), as is the
        Hub token a download or a push sends. Adapters the registry does not know (made by a
        hook) or that declare no options are checked when they are built. The xdist controller
        runs no pair: it finds the Hub token once its workers are started
        (:func:`.workers.configure`), or when it first prints, whichever comes first."""
        if workers.is_controller(self.pytest_config):
            redact.remember_from(hub_token)
        else:
            hub_token()
        for spec in self.config.matrix.models:
            options = spec.option_values
            redact.remember_all(secret for value in options.values() if isinstance(value, str)
                                for secret in redact.url_secrets(value))
            entry = self.entry(spec)
            if entry is None:
                continue
            try:
                entry.check(options)
                redact.remember_all(entry.secrets(options))
            except TypeError as exc:
                raise pytest.UsageError(redact.scrub(
                    f"--rf100vl-adapter-option: {exc}; NAME.KEY=VALUE sets an option for one model only"
                )) from None
            except ValueError as exc:
                raise pytest.UsageError(redact.scrub(f"--rf100vl-adapter-option: {exc}")) from None

    def _check_target(self, metric: Metric, target: str) -> str:
        """A thresholds-file target, spelled by the metric's kind (a mean it checks, a dataset, or
        ``*``: every dataset) and refused when it belongs to another kind."""
        kind = self.kinds[metric.kind]
        if target == ANY_TARGET:
            return target
        spelled = kind.means.get(target.strip().lower(), target)
        others = [other for other in self.kinds.values() if other is not kind and other.claims(spelled)]
        if others or not (kind.fallback or spelled in kind.means.values() or kind.claims(spelled)):
            raise ValueError(f"applies to {kind.target_description}, not {spelled!r}")
        return spelled

    def _rules(self) -> list[Rule]:
        if self.config.report.thresholds is None:
            return []
        metrics = [metric for kind in self.kinds.values() for metric in kind.metrics]
        try:
            return read_thresholds(self.config.report.thresholds, metrics, self._check_target)
        except DataError as exc:
            raise pytest.UsageError(f"thresholds file: {exc}") from None

    @property
    def device(self) -> str:
        if self._device is None:
            resolved = resolve_device(self.config.loop.device)
            self._device = workers.worker_device(self.pytest_config, self.config.loop.device, resolved)
        return self._device

    def model(self, spec: ModelSpec) -> Model:
        """The loaded model of ``spec``; a model that failed to load fails each of its pairs
        with the same error, without retrying."""
        if self._model is None or self._model[0] != spec:
            self.release()
            self._model = (spec, self._load(spec))
        loaded = self._model[1]
        if isinstance(loaded, Exception):
            raise loaded
        return loaded

    def _load(self, spec: ModelSpec) -> Model | Exception:
        loop = self.config.loop
        try:
            with adapter_call("the adapter", errors=()):  # sys.exit too
                made = self.pytest_config.hook.pytest_rf100vl_make_adapter(
                    config=self.pytest_config, spec=spec, device=self.device, dtype=loop.dtype,
                    options=spec.option_values,
                )
                if made is not None:
                    return hosted(made, spec, self.device, loop.dtype)
                return registry.load(spec, self.device, loop.dtype, loop.device_map, loop.attention, loop.compile)
        except Exception as exc:  # any failure to load is reported on each of the model's pairs
            return exc

    def release(self) -> None:
        """Close the loaded model (frees its memory)."""
        if self._model is not None and not isinstance(self._model[1], Exception):
            self._model[1].close()
        self._model = None

    def split(self, pair: Pair) -> Split:
        """The split the pair runs on; each dataset is loaded (validated, prepared) once per
        session by its kind."""
        if pair.dataset not in self._splits:
            self._splits[pair.dataset] = self.kinds[pair.kind].load(pair.dataset, self.device)
        return self._splits[pair.dataset]

    def why_left_out(self, pair: Pair, model: Model) -> str | None:
        """Why ``pair`` is left out for its model (``None``: it runs): a model that does not answer
        the pair's benchmark (its entry's ``tasks``), or one that cannot be fine-tuned when the
        pair asks for it."""
        kind = self.kinds[pair.kind]
        tasks = model.entry.tasks
        if kind.name not in tasks:
            return f"{model.name} does not answer {kind.name} datasets (it answers: {', '.join(tasks)})"
        if kind.trains and self.config.training.split is not None and not model.recipes:
            return f"{model.name} cannot be fine-tuned (it has no recipe), and --rf100vl-train asks for it"
        return None

    def _earlier_rows(self) -> resume.EarlierRows:
        if self._earlier is None:
            self._earlier = resume.EarlierRows(resume.earlier_rows(self.writer.folder))
        return self._earlier

    def identity(self, pair: Pair) -> Split | SplitIdentity:
        """What identifies the split ``pair`` runs on: the split when it is loaded, else its
        kind's identity when the kind knows it without loading (asked once per dataset), else
        the split, loaded."""
        if pair.dataset not in self._splits and pair.dataset not in self._identities:
            self._identities[pair.dataset] = self.kinds[pair.kind].identify(pair.dataset)
        return self._splits.get(pair.dataset) or self._identities[pair.dataset] or self.split(pair)

    def resume(self, pair: Pair) -> bool:
        """Reuse a finished row of ``pair`` from the results folder (``session/resume.py`` says
        when), unless ``--rf100vl-rerun``: record it as this run's, checked against this run's
        thresholds, and tell ``pytest_rf100vl_row_written`` of it (``results.jsonl`` already
        holds the row it copies). Whether a pair was reused; neither the model nor, where its
        kind can identify it by ``stat``, the dataset is loaded to know."""
        if self.config.matrix.rerun or not self._earlier_rows().rows:
            return False
        kind = self.kinds[pair.kind]
        entry = self.entry(pair.spec)
        split = self.identity(pair)
        wanted = resume.planned(pair, entry, split, kind.trains, self.config)
        samples = self.config.report.log_samples and entry is not None and entry.answers_in_text
        found = resume.reusable_row(self._earlier_rows().of(pair.dataset, split.name), wanted, samples)
        if found is None:
            return False
        row = resume.reused_row(found, pair, self.writer.run_id)
        minimums = thresholds(pair, kind, self)
        check, message = checked(pair, kind.metrics, {metric.name: row.column(metric.name) for metric in kind.metrics},
                                 minimums)
        row.check = replace(check, minimums={**row.check.minimums, **check.minimums}, unscored=row.check.unscored)
        self.runs[pair] = PairRun(pair, row, thresholds=minimums, failure=message)
        self.reused.append(row)
        if not workers.is_worker(self.pytest_config):  # a worker's reused rows go to the controller
            listeners.row_written(self.pytest_config, pair, row)
        return True

    def run(self, pair: Pair, benchmark: Any = None) -> PairRun:
        """Run ``pair`` (once per session) through its stages, let hooks add columns, and append
        its row to ``results.jsonl``."""
        if pair in self.runs:
            return self.runs[pair]
        model = self.model(pair.spec)
        split = self.split(pair)
        with adapter_call("the adapter", errors=()):  # sys.exit in predict/ground costs this pair only
            model.start_pair()
            done = run_pair(pair, model, split, self, benchmark)
        too_many = too_many_failed_images(done.row, self.config.report.max_failed_fraction)
        if too_many:
            done.failure = "; ".join(message for message in (too_many, done.failure) if message)
            done.row.check.check = "failed"  # on its failed images, whatever its scores
        if done.row.throughput.answers_from_cache:  # the run that computed the answers timed them
            done.row = with_measured_throughput(done.row, self._earlier_rows().rows)
        for added in self.pytest_config.hook.pytest_rf100vl_result_row(config=self.pytest_config, pair=pair,
                                                                       row=copy.deepcopy(done.row)):
            clash = sorted(set(added or {}) & set(done.row.to_dict()))
            if clash:
                raise ValueError(f"pytest_rf100vl_result_row may only add columns; it returned {', '.join(clash)} "
                                 f"(row of {pair.id})")
            done.row.extra.update(added or {})
        if benchmark is not None:
            benchmark.extra_info.update(benchmark_info(done.row))
        self._write(pair, done.row)
        self.runs[pair] = done
        return done

    def _write(self, pair: Pair, row: ResultRow) -> None:
        """Append ``row`` to ``results.jsonl``, then tell ``pytest_rf100vl_row_written`` (in a
        pytest-xdist worker the controller tells it, as it reads the row back)."""

        self.writer.append(row)
        if not workers.is_worker(self.pytest_config):
            listeners.row_written(self.pytest_config, pair, row)

    @property
    def rows(self) -> list[ResultRow]:
        """This run's rows; under xdist, the controller reads the workers' rows back."""
        if workers.is_controller(self.pytest_config):
            return workers.rows_of_run(self.writer.jsonl, self.writer.run_id, self.pairs, self.reused)
        return [run.row for run in self.runs.values()]

    def reports(self, rows: list[ResultRow]) -> dict[str, Report]:
        """Every kind's part of the summary over its rows (``rows``: the session's, read once),
        by kind name; a kind without rows may still check means (a domain minimum, say)."""
        return {name: kind.report([row for row in rows if row.data.benchmark == name], self.rules)
                for name, kind in self.kinds.items()}


def hub_token() -> list[str | None]:
    """The Hub token a download or a push sends, told to the scrubber
    (:func:`rf100vl_hf.hub.auth.known_token`; importing huggingface_hub takes a while)."""
    from rf100vl_hf.hub.auth import known_token

    return [known_token()]


def benchmark_info(row: ResultRow) -> dict[str, Any]:
    """What pytest-benchmark records in ``extra_info`` (and so in ``--benchmark-json``): the
    row's columns among :data:`rf100vl_hf.results.schema.BENCHMARK_FIELDS` (each kind's rows
    have their own scores)."""
    columns = row.to_dict()
    return {key: columns[key] for key in BENCHMARK_FIELDS if key in columns}


def benchmark_rounds(pytest_config: pytest.Config) -> Rounds:
    """The timing rounds of a split, by pytest-benchmark's ``--benchmark-max-time`` and
    ``--benchmark-min-rounds`` (with pytest-benchmark absent, the engine's defaults)."""
    defaults = Rounds()
    return Rounds(float(pytest_config.getoption("benchmark_max_time", defaults.max_time)),
                  int(pytest_config.getoption("benchmark_min_rounds", defaults.min_rounds)))
