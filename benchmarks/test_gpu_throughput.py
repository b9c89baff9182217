"""On a GPU the throughput column must measure the model, not the loop around it (``docs/scale.md``).

For each full-size model of :mod:`benchmarks.gpu_models` (OWLv2 B/16 at 960, Grounding DINO Swin-T + BERT-base,
OmDet-Turbo, RT-DETRv2 R50, Florence-2 base; random weights, the score option set so that about
150 boxes per image survive, as a trained model's would), in bf16 and fp32, at batch 8 and 32:

- the forward ceiling: the model's forward alone on pixels already on the device (for the
  detectors the adapter's ``launch`` stage, for Florence-2 its ``generate``), in images/s;
- the plugin's steady state: ``run_split`` over 256 JPEGs of 640x640 with 5 classes, answer
  cache off (warm-up batches excluded, as in every row);
- their ratio, which fails under 0.8 in bf16 at batch 32.

It then measures how far scores on CUDA move from CPU (float32 tiny models, TF32 at PyTorch's
defaults and off), the figure ``docs/scale.md`` quotes.

Skipped without CUDA. ``RF100VL_GPU_BENCH_DEVICE=cpu`` runs the same code on the CPU with the tiny
models and no target (a dry run, which ``tests/plugin/test_gpu_benchmark.py`` does so that this
script keeps working between GPU sessions). Run with ``pytest benchmarks/test_gpu_throughput.py -s``;
with ``RF100VL_BENCH_OUT`` set, the figures are also written to ``gpu_throughput.json`` there.
"""

from __future__ import annotations

import io
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.specs import ModelSpec

TARGET = 0.8
CLASSES = ["car", "person", "dog", "tree", "sign"]
BOXES_PER_IMAGE = 150
SCORE_OPTION = {"owlv2": "score_threshold", "omdet-turbo": "score_threshold", "grounding-dino": "box_threshold"}
"""The option that sets how many boxes survive, bisected to :data:`BOXES_PER_IMAGE` (RT-DETRv2 keeps
its best ``max_detections``; Florence-2 writes what it writes, at most ``max_new_tokens`` tokens)."""
DRIFT_MODELS = ("owlv2", "omdet-turbo", "grounding-dino")


@dataclass(frozen=True)
class Plan:
    """What one run measures: where, which checkpoints, how many images, which batches and dtypes."""

    device: str
    full_size: bool
    images: int
    batches: tuple[int, ...]
    dtypes: tuple[str, ...]
    ceiling_seconds: float
    bisections: int  # of the score option
    new_tokens: int  # Florence-2's generation length (a random model rarely ends it sooner)
    target: float | None

    def options(self, name: str) -> dict[str, Any]:
        """The options a model runs with beside its bisected score option."""
        return {"rt-detrv2": {"max_detections": BOXES_PER_IMAGE},
                "florence-2": {"max_new_tokens": self.new_tokens}}.get(name, {})


def plan() -> Plan:
    if os.environ.get("RF100VL_GPU_BENCH_DEVICE") == "cpu":
        return Plan("cpu", False, 12, (4,), ("float32",), 0.1, 3, 4, None)
    return Plan("cuda", True, 256, (8, 32), ("bfloat16", "float32"), 3.0, 14, 64, TARGET)


@dataclass
class Measured:
    model: str
    dtype: str
    batch_size: int
    forward_images_per_s: float
    plugin_images_per_s: float
    boxes_per_image: float

    @property
    def ratio(self) -> float:
        return self.plugin_images_per_s / self.forward_images_per_s


def photo_like(seed: int, size: int = 640) -> bytes:
    """A JPEG of smooth gradients with noise: it compresses and decodes like a photograph."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32)
    base = np.stack([x / size, y / size, (x + y) / (2 * size)], axis=-1) * 200
    buffer = io.BytesIO()
    Image.fromarray(np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)).save(buffer, "JPEG",
                                                                                              quality=90)
    return buffer.getvalue()


def jpeg_split(n: int) -> Any:
    import datasets

    encoded = [photo_like(seed) for seed in range(16)]
    features = datasets.Features({"image": datasets.Image(), "image_id": datasets.Value("int64"),
                                  "file_name": datasets.Value("string"), "width": datasets.Value("int32"),
                                  "height": datasets.Value("int32")})
    return datasets.Dataset.from_dict({
        "image": [{"bytes": encoded[i % len(encoded)], "path": None} for i in range(n)],
        "image_id": list(range(n)), "file_name": [f"{i}.jpg" for i in range(n)],
        "width": [640] * n, "height": [640] * n,
    }, features=features)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def calibrated(chosen: Plan, spec: str, dtype: str, items: list[Any]) -> Any:
    """The adapter of ``spec`` with its score option bisected so that about
    :data:`BOXES_PER_IMAGE` boxes per image survive on ``items``."""
    from pytest_rf100vl.adapters import DetectionTask, create

    name = ModelSpec.parse(spec).name
    adapter = create(spec, device=chosen.device, dtype=dtype, **chosen.options(name))
    adapter.set_task(DetectionTask("benchmark", CLASSES))
    option = SCORE_OPTION.get(name)
    if option is not None:
        low, high = 0.0, 1.0
        for _ in range(chosen.bisections):
            adapter.options[option] = (low + high) / 2
            found = statistics.mean(len(d.scores) for d in adapter.predict(items))
            low, high = (adapter.options[option], high) if found > BOXES_PER_IMAGE else (low, adapter.options[option])
    return adapter


def forward_ceiling(adapter: Any, items: list[Any], batch: int, seconds: float) -> float:
    """Images/s of the model's forward alone, its inputs already on the device."""
    from pytest_rf100vl.adapters.base import Pipelined

    batch_items = (items * math.ceil(batch / len(items)))[:batch]
    if isinstance(adapter, Pipelined):
        prepared = adapter.prepare(batch_items)
        call: Callable[[], Any] = lambda: adapter.launch(prepared)  # noqa: E731
    else:  # a text model: generation on the processor's outputs, already on the device
        from pytest_rf100vl.adapters.hf import image_tensors

        prompt = adapter.prompter.detection(CLASSES, {})
        weights = adapter.transport.weights
        inputs = weights.processor(text=[prompt] * batch, images=image_tensors([i.image for i in batch_items],
                                   weights.torch_device), padding=True, return_tensors="pt", device=weights.torch_device)

        def call() -> Any:
            with torch.inference_mode():
                return adapter.transport.run_generate(inputs)
    for _ in range(2):
        call()
    _sync(adapter.device)
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < seconds:
        call()
        calls += 1
    _sync(adapter.device)
    return calls * batch / (time.perf_counter() - start)


def measure(chosen: Plan, root: Path) -> list[Measured]:
    from pytest_rf100vl.engine.runner import LoopOptions, decode_batch, raw_batches, run_split

    from benchmarks.gpu_models import BUILDERS, full_size

    dataset = jpeg_split(chosen.images)
    (raw,) = raw_batches(dataset.select(range(4)), 4)
    items = decode_batch(raw)
    rows = []
    for name in BUILDERS:
        checkpoint = str(full_size(name, root)) if chosen.full_size else "tiny"
        for dtype in chosen.dtypes:
            adapter = calibrated(chosen, f"{name}:{checkpoint}", dtype, items)
            boxes = statistics.mean(len(d.scores) for d in adapter.predict(items))
            for batch in chosen.batches:
                ceiling = forward_ceiling(adapter, items, batch, chosen.ceiling_seconds)
                result = run_split(adapter, dataset, None, batch, progress=False, loop=LoopOptions(2, None))
                rows.append(Measured(name, dtype, batch, ceiling, result.timing.images_per_s, boxes))
                print(f"{name} {dtype} batch {batch}: forward {ceiling:.1f} images/s, plugin "
                      f"{rows[-1].plugin_images_per_s:.1f} ({rows[-1].ratio:.2f}x), {boxes:.0f} boxes per image",
                      flush=True)
            adapter.close()
            del adapter
            if chosen.device.startswith("cuda"):
                torch.cuda.empty_cache()
    return rows


def score_drift(items: list[Any]) -> dict[str, dict[str, Any]]:
    """Per tiny model: the largest change of a score from float32 CPU to float32 CUDA, with TF32
    at PyTorch's defaults and off, and how many boxes each device kept (scores compared in rank
    order over the boxes both kept)."""
    from pytest_rf100vl.adapters import DetectionTask, create

    drift = {}
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn.conv
    for name in DRIFT_MODELS:
        task = DetectionTask("drift", CLASSES)
        cpu = create(f"{name}:tiny")
        cpu.set_task(task)
        reference = cpu.predict(items)
        for label, precision in (("tf32 default", None), ("tf32 off", "ieee")):
            before = matmul.fp32_precision, conv.fp32_precision
            if precision:
                matmul.fp32_precision = conv.fp32_precision = precision
            try:
                gpu = create(f"{name}:tiny", device="cuda")
                gpu.set_task(task)
                found = gpu.predict(items)
            finally:
                matmul.fp32_precision, conv.fp32_precision = before
            largest, counts = 0.0, []
            for mine, theirs in zip(found, reference):
                n = min(len(mine.scores), len(theirs.scores))
                counts.append((len(theirs.scores), len(mine.scores)))
                if n:
                    largest = max(largest, float(np.abs(np.sort(mine.scores)[-n:] - np.sort(theirs.scores)[-n:]).max()))
            drift[f"{name}, {label}"] = {"max_score_change": largest, "boxes_cpu_cuda": counts}
    return drift


def table(rows: list[Measured]) -> str:
    lines = ["| model | dtype | batch | forward images/s | plugin images/s | ratio | boxes/image |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.model} | {r.dtype} | {r.batch_size} | {r.forward_images_per_s:.1f} | "
              f"{r.plugin_images_per_s:.1f} | {r.ratio:.2f} | {r.boxes_per_image:.0f} |" for r in rows]
    return "\n".join(lines)


@pytest.mark.skipif(not torch.cuda.is_available() and os.environ.get("RF100VL_GPU_BENCH_DEVICE") != "cpu",
                    reason="no CUDA device (RF100VL_GPU_BENCH_DEVICE=cpu runs it on the CPU with tiny models)")
def test_the_plugin_feeds_each_model_at_least_its_target_share_of_its_forward(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    chosen = plan()
    rows = measure(chosen, tmp_path_factory.mktemp("full-size-models"))
    print("\n" + table(rows))
    drift = {}
    if chosen.device.startswith("cuda"):
        from pytest_rf100vl.engine.runner import decode_batch, raw_batches

        (raw,) = raw_batches(jpeg_split(4), 4)
        drift = score_drift(decode_batch(raw))
        for name, figures in drift.items():
            print(f"CPU -> CUDA, {name}: scores moved by up to {figures['max_score_change']:.2e}; "
                  f"boxes kept (cpu, cuda) per image {figures['boxes_cpu_cuda']}")
    out = os.environ.get("RF100VL_BENCH_OUT")
    if out:
        Path(out, "gpu_throughput.json").write_text(json.dumps(
            {"plan": asdict(chosen), "rows": [{**asdict(r), "ratio": r.ratio} for r in rows], "drift": drift},
            indent=2), encoding="utf-8")
    assert all(r.plugin_images_per_s > 0 and r.forward_images_per_s > 0 for r in rows)
    if chosen.target is not None:
        short = [r for r in rows if r.dtype == "bfloat16" and r.batch_size == 32 and r.ratio < chosen.target]
        assert not short, f"under {chosen.target}x of the forward ceiling: " + ", ".join(
            f"{r.model} {r.ratio:.2f}x" for r in short)
