"""The columns every results row has, whatever its benchmark kind: what ran, on what, how
fast, and what its output needed. Kinds add their own scores (see ``docs/architecture.md``)."""

from __future__ import annotations

import json
import math
import shlex
import statistics
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.engine.runner import OutputCounts, Timing

VERSIONED = ("torch", "transformers", "datasets", "faster-coco-eval", "pycocotools", "rf100vl-hf")
SCORING_VERSION = 2
"""Part of every row's identity (``scoring_version``): bumped whenever a change of the plugin
or the library changes a score for the same predictions, so that older rows are not reused
(2: scored exactly as pycocotools scores them, maxDets per image and class)."""
LATENCIES = ("latency_batch_p50_ms", "latency_batch_p95_ms", "latency_image_p50_ms", "latency_image_p95_ms")


def versions() -> dict[str, str | None]:
    """Installed versions of what a score depends on (read from metadata: nothing is imported)."""
    found: dict[str, str | None] = {}
    for package in VERSIONED:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def hardware_columns() -> dict[str, Any]:
    """Python, CPU, GPUs and the package's git commit: what a cited row needs besides versions."""
    from rf100vl_hf import provenance

    gpu_name, gpu_count = provenance.gpus()
    return {
        "python_version": provenance.python_version(),
        "cpu_model": provenance.cpu_model(),
        "gpu_name": gpu_name,
        "gpu_count": gpu_count,
        "package_commit": provenance.package_commit(),
    }


def command_line(args: list[str]) -> str:
    """The command that ran (pytest's arguments), as recorded: URLs without credentials or query."""
    from rf100vl_hf.redact import public_argument

    return shlex.join(["pytest", *(public_argument(token) for token in args)])


def options_column(options: dict[str, Any]) -> str:
    """Adapter options as one column: JSON with sorted keys (values that JSON lacks as text),
    URLs without credentials or query (:func:`rf100vl_hf.redact.public_url`)."""
    from rf100vl_hf.redact import public_value

    return json.dumps({key: public_value(value) for key, value in options.items()}, sort_keys=True, default=str)


def throughput(timings: list["Timing"]) -> dict[str, Any]:
    """The throughput columns of a row: images/s as the median of the rounds' steady states,
    with their minimum, maximum and number (rounds without a steady state left out)."""
    rates = [t.images_per_s for t in timings if not math.isnan(t.images_per_s)]
    if not rates:
        return {"images_per_s": float("nan"), "images_per_s_min": None, "images_per_s_max": None,
                "throughput_rounds": 0}
    return {"images_per_s": statistics.median(rates), "images_per_s_min": min(rates),
            "images_per_s_max": max(rates), "throughput_rounds": len(rates)}


def common_columns(
    pair: "Pair",
    described: dict[str, Any],
    options: dict[str, Any],
    split: str,
    batch_size: int | str,
    timing: "Timing",
    counts: "OutputCounts",
    run_id: str,
    rounds: "list[Timing] | None" = None,
) -> dict[str, Any]:
    """The columns of every row; ``described`` is the adapter's ``describe()``, ``batch_size``
    what was asked (a number or ``auto``), ``timing`` and ``counts`` the scoring round's,
    ``rounds`` every timed round (default: the scoring one)."""
    latency = timing.latency_ms()
    compiled = bool(described.get("compiled"))
    return {
        "run_id": run_id,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "benchmark": pair.kind,
        "model": described["model"],
        "spec": pair.model,
        "checkpoint": described["checkpoint"],
        "model_revision": described["revision"],
        "adapter_options": options_column(options),
        "dataset": pair.dataset,
        "split": split,
        "n_images": timing.n_images,
        **throughput(rounds or [timing]),
        **{key: latency.get(key) for key in LATENCIES},
        "peak_gpu_memory_mb": timing.peak_gpu_memory_mb,
        "inference_s": timing.seconds,
        "warmup_s": timing.warmup_seconds,
        "warmup_batches": timing.warmup_batches,
        "cached_images": timing.cached_images,
        "answers_from_cache": timing.n_images > 0 and timing.cached_images == timing.n_images,
        "throughput_from": None,
        "device": described["device"],
        "dtype": described["dtype"],
        "device_map": described.get("device_map"),
        "batch_size": timing.batch_size,
        "batch_size_requested": str(batch_size),
        "attention": described.get("attention"),
        "compiled": compiled,
        "compile_s": timing.compile_seconds() if compiled else None,
        **{f"{package.replace('-', '_')}_version": v for package, v in versions().items()},
        **hardware_columns(),
        "smoke": bool(described["smoke"]),
        **counts.as_dict(),
        "scoring_version": SCORING_VERSION,
        "reused_from": None,
    }
