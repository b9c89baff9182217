"""The columns every results row has, whatever its benchmark kind: what ran, on what, how
fast, and what its output needed. Kinds add their own scores (see ``docs/architecture.md``)."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_rf100vl.collect.selection import Pair
    from pytest_rf100vl.run.runner import OutputCounts, Timing

VERSIONED = ("torch", "transformers", "datasets", "rf100vl-hf")
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


def options_column(options: dict[str, Any]) -> str:
    """Adapter options as one column: JSON with sorted keys (values that JSON lacks as text)."""
    return json.dumps(options, sort_keys=True, default=str)


def common_columns(
    pair: "Pair",
    described: dict[str, Any],
    options: dict[str, Any],
    split: str,
    batch_size: int,
    timing: "Timing",
    counts: "OutputCounts",
    run_id: str,
) -> dict[str, Any]:
    """The columns of every row; ``described`` is the adapter's ``describe()``."""
    latency = timing.latency_ms()
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
        "images_per_s": timing.images_per_s,
        **{key: latency.get(key) for key in LATENCIES},
        "peak_gpu_memory_mb": timing.peak_gpu_memory_mb,
        "inference_s": timing.seconds,
        "warmup_s": timing.warmup_seconds,
        "warmup_batches": timing.warmup_batches,
        "cached_images": timing.cached_images,
        "device": described["device"],
        "dtype": described["dtype"],
        "device_map": described.get("device_map"),
        "batch_size": batch_size,
        **{f"{package.replace('-', '_')}_version": v for package, v in versions().items()},
        "smoke": bool(described["smoke"]),
        "command": shlex.join(["pytest", *sys.argv[1:]]),
        **counts.as_dict(),
        "scoring_version": SCORING_VERSION,
        "reused_from": None,
    }
