"""The row sections the loop and the session fill, whatever the benchmark (the row's schema is
:mod:`rf100vl_hf.results.schema`): the model and how it ran, how fast, what its output needed,
where it ran, and the command. Kinds fill their data and scores sections; the training stage
its own."""

from __future__ import annotations

import json
import shlex
import statistics
from dataclasses import replace
from typing import Any

from rf100vl_hf import provenance
from rf100vl_hf.redact import public_argument, public_value
from rf100vl_hf.results.schema import ModelColumns, OutputColumns, ProvenanceColumns, ThroughputColumns
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.adapters.base import ModelInfo
from pytest_rf100vl.engine.runner import Answers, Timing, seconds_per_image


def command_line(args: list[str]) -> str:
    """The command that ran (pytest's arguments), as recorded: URLs without credentials or query."""
    return shlex.join(["pytest", *(public_argument(token) for token in args)])


def options_column(options: dict[str, Any]) -> str:
    """Adapter options as one column: JSON with sorted keys (values that JSON lacks as text),
    URLs without credentials or query (:func:`rf100vl_hf.redact.public_url`)."""
    return json.dumps({key: public_value(value) for key, value in options.items()}, sort_keys=True, default=str)


def model_identity(info: ModelInfo, dtype: str | None) -> ModelColumns:
    """The model's identity columns (those :data:`rf100vl_hf.results.schema.IDENTITY` flags), from
    ``info`` and the ``dtype`` it runs in: the one way a row's model, the model a resumed pair
    must match, and a fit's key are assembled (:func:`rf100vl_hf.results.schema.identity_of`)."""
    return ModelColumns(model=info.name, checkpoint=info.checkpoint, model_revision=info.revision,
                        adapter_options=options_column(info.options), dtype=dtype)


def model_columns(info: ModelInfo, described: dict[str, Any], spec: ModelSpec, batch_size: int | str,
                  timing: Timing, smoke: bool = False) -> ModelColumns:
    """The model as it ran: ``info`` identifies it, ``described`` is the adapter's ``describe()``
    (where it ran: device, dtype, device map, attention, compilation), ``spec`` as asked for (its
    options are the options as given), ``batch_size`` what was asked (a number or ``auto``; the row
    records both); ``smoke`` when the data itself makes the scores meaningless."""
    compiled = bool(described.get("compiled"))
    return replace(
        model_identity(info, described["dtype"]), spec=spec.text, requested_options=options_column(spec.option_values),
        device=described["device"], device_map=described.get("device_map"),
        batch_size=timing.batch_size, batch_size_requested=str(batch_size), attention=described.get("attention"),
        compiled=compiled, compile_s=timing.compile_seconds() if compiled else None,
        smoke=info.smoke or smoke,
    )


def throughput_columns(answers: Answers) -> ThroughputColumns:
    """Images/s of the rounds' steady states: the inverse of the median of their seconds per
    image (the median of pytest-benchmark's table), with their minimum, maximum and number
    (rounds without a steady state left out); latencies, memory and warm-up of the scoring round."""
    timing = answers.timing
    per_image = seconds_per_image(answers.rounds or [timing])
    rates = [1 / seconds for seconds in per_image]
    latency = timing.latency_ms()
    return ThroughputColumns(
        images_per_s=1 / statistics.median(per_image) if per_image else float("nan"),
        images_per_s_min=min(rates) if rates else None, images_per_s_max=max(rates) if rates else None,
        throughput_rounds=len(rates), **{key: latency.get(key) for key in (
            "latency_batch_p50_ms", "latency_batch_p95_ms", "latency_image_p50_ms", "latency_image_p95_ms")},
        peak_gpu_memory_mb=timing.peak_gpu_memory_mb, inference_s=timing.seconds, warmup_s=timing.warmup_seconds,
        warmup_batches=timing.warmup_batches, cached_images=timing.cached_images,
        answers_from_cache=timing.n_images > 0 and timing.cached_images == timing.n_images,
    )


def output_columns(answers: Answers) -> OutputColumns:
    """What the model's output needed to be scored, and what the adapter counted in its answers."""
    return OutputColumns(**answers.counts.as_dict(), answer_counts=dict(answers.answer_counts))


def provenance_columns() -> ProvenanceColumns:
    """What scored the row (versions, the scoring version, the package's commit) and what it ran
    on (Python, CPU, GPUs)."""
    gpu_name, gpu_count = provenance.gpus()
    return ProvenanceColumns(versions=provenance.versions(), python_version=provenance.python_version(),
                             cpu_model=provenance.cpu_model(), gpu_name=gpu_name, gpu_count=gpu_count,
                             package_commit=provenance.package_commit())
