"""The state of one pytest session's matrix: loaded models and datasets, finished runs, and
the results folder. It lives in ``config.stash``, so in-process pytest runs do not share it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rf100vl.grounding import GroundingEvaluation, run_grounding_pair
from pytest_rf100vl.options import Settings
from pytest_rf100vl.pair import Evaluation, run_pair
from pytest_rf100vl.results import ResultsWriter, detection_row, grounding_row
from pytest_rf100vl.selection import UOUO, Pair, matrix, uouo_config
from pytest_rf100vl.thresholds import Rule, Threshold, failure, read_thresholds, threshold_for

if TYPE_CHECKING:
    import datasets

    from rf100vl_hf.metrics import CocoScores, GroundingScores

    from pytest_rf100vl.adapters.base import Adapter


@dataclass
class PairRun:
    """A finished pair: its scores and inference record, its results row, and the threshold
    checks (``thresholds``: metric -> minimum; ``failure`` is the message when the pair is
    below one)."""

    pair: Pair
    evaluation: Evaluation | GroundingEvaluation
    row: dict[str, Any]
    thresholds: dict[str, Threshold]
    failure: str | None

    @property
    def scores(self) -> "CocoScores | GroundingScores":
        """COCO scores for an RF100-VL pair, grounding scores for a UOUO pair."""
        return self.evaluation.scores


CLIP_HINT = (
    "UOUO mosaics embed the cut-outs with CLIP: download its weights once, or point --uouo-clip-pretrained "
    "at a local weights file (or --uouo-clip-model at local-dir:DIR)"
)


def _default(value: float | None, flag: str) -> Threshold | None:
    """The command line's minimum, for pairs the thresholds file says nothing about."""
    return None if value is None else Threshold(value, flag)


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
        self._check_adapter_options()
        run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
        self.writer = ResultsWriter(settings.results, run_id)
        self.runs: dict[Pair, PairRun] = {}
        self.missing: dict[str, str] = {}  # dataset -> how to get it
        self.errors: dict[str, str] = {}  # pair id -> why it could not run
        self.left_out: dict[str, str] = {}  # pair id -> why the model does not answer it
        self._device: str | None = None
        self._adapter: tuple[str, "Adapter | Exception"] | None = None
        self._datasets: dict[str, "datasets.Dataset | datasets.DatasetDict"] = {}

    def _check_adapter_options(self) -> None:
        """An option a model's adapter does not declare is a usage error now, before any model
        loads. Adapters the registry does not know (made by a hook) or that declare no
        options are checked when they are built."""
        from pytest_rf100vl.adapters import registry

        for spec in self.settings.models:
            options = self.settings.options_for(spec)
            if not options:
                continue
            try:
                cls = registry.adapter_class(registry.parse_spec(spec)[0])
            except Exception:  # unknown to the registry, or its module fails to import: reported per pair
                continue
            try:
                cls.check_options(options)
            except TypeError as exc:
                raise pytest.UsageError(
                    f"--rf100vl-adapter-option: {exc}; NAME.KEY=VALUE sets an option for one model only"
                ) from None

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

        options = self.settings.options_for(spec)
        try:
            adapter = self.config.hook.pytest_rf100vl_make_adapter(
                config=self.config, spec=spec, device=self.device, dtype=self.settings.dtype, options=options
            )
            return adapter or registry.create(spec, device=self.device, dtype=self.settings.dtype, **options)
        except Exception as exc:  # any failure to load is reported on each of the model's pairs
            return exc

    def release(self) -> None:
        """Close the loaded model (frees its memory)."""
        if self._adapter is not None and not isinstance(self._adapter[1], Exception):
            self._adapter[1].close()
        self._adapter = None

    def dataset(self, name: str, split: str | None = None) -> "datasets.Dataset":
        """A split of ``name`` (default: the session's; UOUO has only ``test``). Each dataset is
        validated and prepared once per session, all its splits at once."""
        config = uouo_config(name)
        if name not in self._datasets:
            if config:
                self._datasets[name] = self._uouo(config)
            else:
                from rf100vl_hf.rf100vl.builder import load_rf100vl

                self._datasets[name] = load_rf100vl(
                    name, data_dir=self.settings.data_dir, fewshot_dir=self.settings.fewshot_dir, progress=False
                )
        if config:
            return self._datasets[name]
        splits = self._datasets[name]
        split = split or self.settings.split
        if split not in splits:
            raise ValueError(f"dataset {name!r} has no split {split!r} (it has: {', '.join(splits)})")
        return splits[split]

    def _uouo(self, config: str) -> "datasets.Dataset":
        """The test split of a UOUO config, built on first use from the session's source and CLIP."""
        from datasets.exceptions import DatasetGenerationError

        from rf100vl_hf.uouo.builder import load_uouo

        parameters = self.settings.uouo_parameters()
        try:
            return load_uouo(config, split="test", device=self.device, progress=False, **parameters)
        except DatasetGenerationError as exc:  # datasets wraps what failed while the mosaics were made
            cause = exc.__cause__ or exc
            hint = f"; {CLIP_HINT}" if "weights" in str(cause) else ""
            raise RuntimeError(
                f"building the uouo-{config} mosaics failed: {type(cause).__name__}: {cause}{hint}"
            ) from exc

    def run(self, pair: Pair, benchmark: Any = None) -> PairRun:
        """Run ``pair`` (once per session), append its row to ``results.jsonl`` and write its
        predictions (RF100-VL) or answers (UOUO)."""
        if pair in self.runs:
            return self.runs[pair]
        done = self._run_uouo(pair, benchmark) if pair.kind == UOUO else self._run_rf100vl(pair, benchmark)
        if benchmark is not None:
            benchmark.extra_info.update(benchmark_info(done.row))
        self.writer.append(done.row)
        self.runs[pair] = done
        return done

    def _run_rf100vl(self, pair: Pair, benchmark: Any) -> PairRun:
        from rf100vl_hf.metadata import read_metadata

        settings = self.settings
        dataset = self.dataset(pair.dataset)
        metadata = read_metadata(dataset)
        adapter = self.adapter(pair.model)
        evaluation = run_pair(
            adapter, dataset, metadata, settings.split, settings.prompt, settings.batch_size,
            lambda split: self.dataset(pair.dataset, split), benchmark,
        )
        threshold = threshold_for(
            self.rules, pair.model, pair.dataset, "ap", _default(settings.min_ap, "--rf100vl-min-ap")
        )
        path = self.writer.write_predictions(pair.model, pair.dataset, settings.split, evaluation.predictions)
        row = detection_row(
            pair, adapter.describe(), adapter.options, metadata, settings.split, settings.prompt,
            settings.batch_size, evaluation, self.writer.run_id, threshold, path,
        )
        message = failure(f"{pair.model} on {pair.dataset}", "ap", row["ap"], threshold) if threshold else None
        return PairRun(pair, evaluation, row, {"ap": threshold} if threshold else {}, message)

    def _run_uouo(self, pair: Pair, benchmark: Any) -> PairRun:
        from rf100vl_hf.metadata import read_metadata

        settings = self.settings
        dataset = self.dataset(pair.dataset)
        metadata = read_metadata(dataset)
        adapter = self.adapter(pair.model)
        evaluation = run_grounding_pair(
            adapter, dataset, pair.dataset, metadata["canvas"], settings.batch_size, benchmark
        )
        defaults = {
            "accuracy": _default(settings.uouo_min_accuracy, "--uouo-min-accuracy"),
            "miou": _default(settings.uouo_min_miou, "--uouo-min-miou"),
        }
        thresholds = {
            metric: threshold
            for metric, default in defaults.items()
            if (threshold := threshold_for(self.rules, pair.model, pair.dataset, metric, default)) is not None
        }
        path = self.writer.write_answers(pair.model, pair.dataset, evaluation.records)
        row = grounding_row(
            pair, adapter.describe(), adapter.options, metadata, settings.batch_size, evaluation,
            self.writer.run_id, thresholds, path,
        )
        messages = [failure(f"{pair.model} on {pair.dataset}", m, row[m], t) for m, t in thresholds.items()]
        return PairRun(pair, evaluation, row, thresholds, "; ".join(m for m in messages if m) or None)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [run.row for run in self.runs.values()]


BENCHMARK_FIELDS = (
    "images_per_s", "latency_batch_p50_ms", "latency_batch_p95_ms", "latency_image_p50_ms", "latency_image_p95_ms",
    "peak_gpu_memory_mb", "device", "dtype", "batch_size", "spec", "model", "checkpoint", "model_revision",
    "benchmark", "dataset", "split", "prompt", "n_images", "ap", "accuracy", "miou", "smoke", "dataset_fingerprint",
)


def benchmark_info(row: dict[str, Any]) -> dict[str, Any]:
    """What pytest-benchmark records in ``extra_info`` (and so in ``--benchmark-json``); an
    RF100-VL row has no ``accuracy``, a UOUO row no ``ap`` or ``prompt``."""
    return {key: row[key] for key in BENCHMARK_FIELDS if key in row}
