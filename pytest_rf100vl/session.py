"""The state of one pytest session's matrix: loaded models and datasets, finished runs, and
the results folder. It lives in ``config.stash``, so in-process pytest runs do not share it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rf100vl.options import Settings
from pytest_rf100vl.pair import Evaluation, run_pair
from pytest_rf100vl.results import ResultsWriter, result_row
from pytest_rf100vl.selection import Pair, matrix
from pytest_rf100vl.thresholds import Rule, Threshold, failure, read_thresholds, threshold_for

if TYPE_CHECKING:
    import datasets

    from rf100vl_hf.metrics import CocoScores

    from pytest_rf100vl.adapters.base import Adapter


@dataclass
class PairRun:
    """A finished pair: its scores and inference record, its results row, and the threshold
    check (``failure`` is the message when the pair is below its threshold)."""

    pair: Pair
    evaluation: Evaluation
    row: dict[str, Any]
    threshold: Threshold | None
    failure: str | None

    @property
    def scores(self) -> "CocoScores":
        return self.evaluation.scores


def resolve_device(device: str) -> str:
    """``auto``: cuda, then mps, then cpu (imports torch only then)."""
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


class MatrixSession:
    """Loads each model once for its datasets (releasing it when the next model starts and at
    the end) and each dataset once per session, runs pairs once, and records them."""

    def __init__(self, config: pytest.Config, settings: Settings):
        self.config = config
        self.settings = settings
        self.pairs: list[Pair] = matrix(settings)
        self.rules: list[Rule] = self._rules()
        run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
        self.writer = ResultsWriter(settings.results, run_id)
        self.runs: dict[Pair, PairRun] = {}
        self.missing: dict[str, str] = {}  # dataset -> how to get it
        self.errors: dict[str, str] = {}  # pair id -> why it could not run
        self._device: str | None = None
        self._adapter: tuple[str, "Adapter | Exception"] | None = None
        self._datasets: dict[tuple[str, str], "datasets.Dataset"] = {}

    def _rules(self) -> list[Rule]:
        from rf100vl_hf.errors import DataError

        if self.settings.thresholds is None:
            return []
        try:
            return read_thresholds(self.settings.thresholds)
        except DataError as exc:
            raise pytest.UsageError(f"--rf100vl-thresholds: {exc}") from None

    @property
    def device(self) -> str:
        if self._device is None:
            self._device = resolve_device(self.settings.device)
        return self._device

    def adapter(self, spec: str) -> "Adapter":
        """The loaded adapter of ``spec``; a model that failed to load fails each of its pairs
        with the same error, without retrying."""
        if self._adapter is None or self._adapter[0] != spec:
            self.release()
            self._adapter = (spec, self._load(spec))
        loaded = self._adapter[1]
        if isinstance(loaded, Exception):
            raise loaded
        return loaded

    def _load(self, spec: str) -> "Adapter | Exception":
        from pytest_rf100vl.adapters import registry

        try:
            adapter = self.config.hook.pytest_rf100vl_make_adapter(
                config=self.config, spec=spec, device=self.device, dtype=self.settings.dtype
            )
            return adapter or registry.create(spec, device=self.device, dtype=self.settings.dtype)
        except Exception as exc:  # any failure to load is reported on each of the model's pairs
            return exc

    def release(self) -> None:
        """Close the loaded model (frees its memory)."""
        if self._adapter is not None and not isinstance(self._adapter[1], Exception):
            self._adapter[1].close()
        self._adapter = None

    def dataset(self, name: str, split: str | None = None) -> "datasets.Dataset":
        """A split of ``name`` (default: the session's), prepared once per session."""
        from rf100vl_hf.rf100vl.builder import load_rf100vl

        split = split or self.settings.split
        key = (name, split)
        if key not in self._datasets:
            self._datasets[key] = load_rf100vl(
                name, split=split, data_dir=self.settings.data_dir, fewshot_dir=self.settings.fewshot_dir,
                progress=False,
            )
        return self._datasets[key]

    def run(self, pair: Pair, benchmark: Any = None) -> PairRun:
        """Run ``pair`` (once per session), append its row to ``results.jsonl`` and write its predictions."""
        if pair in self.runs:
            return self.runs[pair]
        from rf100vl_hf.metadata import read_metadata

        settings = self.settings
        dataset = self.dataset(pair.dataset)
        metadata = read_metadata(dataset)
        adapter = self.adapter(pair.model)
        evaluation = run_pair(
            adapter, dataset, metadata, settings.split, settings.prompt, settings.batch_size,
            lambda split: self.dataset(pair.dataset, split), benchmark,
        )
        threshold = threshold_for(self.rules, pair.model, pair.dataset, settings.min_ap)
        path = self.writer.write_predictions(pair.model, pair.dataset, settings.split, evaluation.predictions)
        row = result_row(
            pair, adapter.describe(), metadata, settings.split, settings.prompt, settings.batch_size,
            evaluation, self.writer.run_id, threshold, path,
        )
        if benchmark is not None:
            benchmark.extra_info.update(benchmark_info(row))
        self.writer.append(row)
        message = failure(f"{pair.model} on {pair.dataset}", row["ap"], threshold) if threshold else None
        self.runs[pair] = PairRun(pair, evaluation, row, threshold, message)
        return self.runs[pair]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [run.row for run in self.runs.values()]


BENCHMARK_FIELDS = (
    "images_per_s", "latency_batch_p50_ms", "latency_batch_p95_ms", "latency_image_p50_ms", "latency_image_p95_ms",
    "peak_gpu_memory_mb", "device", "dtype", "batch_size", "spec", "model", "checkpoint", "model_revision",
    "dataset", "split", "prompt", "n_images", "ap", "smoke", "dataset_fingerprint",
)


def benchmark_info(row: dict[str, Any]) -> dict[str, Any]:
    """What pytest-benchmark records in ``extra_info`` (and so in ``--benchmark-json``)."""
    return {key: row[key] for key in BENCHMARK_FIELDS}
