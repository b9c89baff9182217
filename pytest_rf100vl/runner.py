"""Inference over one split: decoding overlaps the model, every output is made safe to score,
and a model that fails on an image costs that image, not the run.

The loop times itself (wall clock and per batch), so throughput is recorded whether or not
pytest-benchmark is timing it too.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rf100vl_hf.boxes import Sanitized, sanitize_detections
from rf100vl_hf.images import open_rgb

from pytest_rf100vl.adapters.base import Adapter, Detections, ImageItem

if TYPE_CHECKING:
    import datasets

T = TypeVar("T")
_END = object()
PREFETCH_BATCHES = 2


@dataclass
class OutputCounts:
    """What it took to make a model's output scoreable; reported with every result."""

    dropped: int = 0  # NaN/inf box or score, or a label that is not a class index
    clipped: int = 0  # boxes reaching outside the image, clipped to it
    truncated: int = 0  # beyond the best MAX_DETECTIONS of an image
    failed_images: int = 0  # the adapter raised (or answered wrongly) for the image
    first_error: str | None = None  # traceback of the first failure

    def fail(self, item: ImageItem, error: BaseException) -> None:
        self.failed_images += 1
        if self.first_error is None:
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self.first_error = f"image {item.image_id} ({item.file_name}):\n{trace}"

    def add_repairs(self, other: "OutputCounts") -> None:
        """Take on the repairs counted in ``other`` (kept apart until a whole batch succeeded)."""
        self.dropped += other.dropped
        self.clipped += other.clipped
        self.truncated += other.truncated

    def as_dict(self) -> dict[str, Any]:
        return {
            "dropped": self.dropped,
            "clipped": self.clipped,
            "truncated": self.truncated,
            "failed_images": self.failed_images,
            "first_error": self.first_error,
        }


@dataclass
class InferenceResult:
    """Safe detections per image id, and how long it took."""

    detections: dict[int, Sanitized]
    counts: OutputCounts
    seconds: float
    batch_seconds: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    peak_gpu_memory_mb: float | None = None

    @property
    def n_images(self) -> int:
        return len(self.detections)

    @property
    def images_per_s(self) -> float:
        return self.n_images / self.seconds if self.seconds > 0 else float("nan")

    def latency_ms(self) -> dict[str, float]:
        """p50 and p95 latency of a batch, and of an image (a batch's time over its size)."""
        if not self.batch_seconds:
            return {}
        batch = np.asarray(self.batch_seconds) * 1000
        image = batch / np.asarray(self.batch_sizes)
        return {
            "latency_batch_p50_ms": float(np.percentile(batch, 50)),
            "latency_batch_p95_ms": float(np.percentile(batch, 95)),
            "latency_image_p50_ms": float(np.percentile(image, 50)),
            "latency_image_p95_ms": float(np.percentile(image, 95)),
        }


def prefetched(iterable: Iterable[T], depth: int = PREFETCH_BATCHES) -> Iterator[T]:
    """Items of ``iterable`` produced by a worker thread ``depth`` items ahead of the consumer.

    Decoding (PIL releases the GIL) then runs while the model works on the previous batch.
    """
    iterator = iter(iterable)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rf100vl-decode") as pool:
        pending = deque(pool.submit(next, iterator, _END) for _ in range(depth))
        while True:
            item = pending.popleft().result()
            if item is _END:
                return
            pending.append(pool.submit(next, iterator, _END))
            yield item


def decoded_batches(dataset: "datasets.Dataset", batch_size: int) -> Iterator[list[ImageItem]]:
    """Batches of RGB images, decoded from the original file bytes with ``open_rgb``."""
    import datasets

    rows = dataset.select_columns(["image", "image_id", "file_name"]).cast_column(
        "image", datasets.Image(decode=False)
    )
    for batch in rows.iter(batch_size):
        yield [
            ImageItem(open_rgb(image["bytes"] or Path(image["path"]).read_bytes()), int(image_id), file_name)
            for image, image_id, file_name in zip(batch["image"], batch["image_id"], batch["file_name"])
        ]


def _outside(boxes: np.ndarray, width: int, height: int) -> int:
    """How many boxes reach outside the image (they will be clipped)."""
    limits = np.array([width, height, width, height])
    return int(((boxes < 0) | (boxes > limits)).any(axis=1).sum())


def make_safe(detections: Detections, item: ImageItem, n_classes: int, counts: OutputCounts) -> Sanitized:
    """One image's output, cleaned by ``sanitize_detections``; labels outside the classes are dropped."""
    labels = np.asarray(detections.labels).reshape(-1)
    boxes = np.asarray(detections.boxes, dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(detections.scores, dtype=np.float64).reshape(-1)
    if not (len(boxes) == len(scores) == len(labels)):
        raise ValueError(
            f"detections disagree in length: {len(boxes)} boxes, {len(scores)} scores, {len(labels)} labels"
        )
    valid = (labels >= 0) & (labels < n_classes) & (labels == np.round(labels))
    width, height = item.image.size
    finite = np.isfinite(boxes).all(axis=1) & np.isfinite(scores)
    counts.clipped += _outside(boxes[valid & finite], width, height)
    counts.dropped += int((~valid).sum())
    safe = sanitize_detections(boxes[valid], scores[valid], labels[valid].astype(np.int64), width, height)
    counts.dropped += safe.non_finite
    counts.truncated += safe.truncated
    return safe


def _detect(adapter: Adapter, items: list[ImageItem], n_classes: int, counts: OutputCounts) -> list[Sanitized]:
    """The adapter's safe output for a batch; on failure each image is retried alone, and an
    image that still fails gets no detections and is counted."""
    try:
        outputs = adapter.predict(items)
        if len(outputs) != len(items):
            raise ValueError(f"predict returned {len(outputs)} results for {len(items)} images")
        scratch = OutputCounts()
        safe = [make_safe(d, item, n_classes, scratch) for d, item in zip(outputs, items)]
    except Exception as error:
        if len(items) > 1:
            return [s for item in items for s in _detect(adapter, [item], n_classes, counts)]
        counts.fail(items[0], error)
        return [make_safe(Detections.empty(), items[0], n_classes, counts)]
    counts.add_repairs(scratch)
    return safe


def _synchronize(device: str) -> None:
    """Wait for queued GPU work, so the clock measures it (torch is loaded by then if used)."""
    torch = sys.modules.get("torch")
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize(device)


def _reset_peak_memory(device: str) -> None:
    torch = sys.modules.get("torch")
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats(device)


def _peak_memory_mb(device: str) -> float | None:
    torch = sys.modules.get("torch")
    if torch is not None and device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated(device) / 2**20
    return None


def run_inference(
    adapter: Adapter,
    dataset: "datasets.Dataset",
    batch_size: int = 1,
    progress: bool = True,
    description: str | None = None,
) -> InferenceResult:
    """Run ``adapter`` (its task already set) over every image of ``dataset``."""
    from tqdm.auto import tqdm

    assert adapter.task is not None, "set_task must be called before run_inference"
    n_classes = len(adapter.task.classes)
    counts = OutputCounts()
    detections: dict[int, Sanitized] = {}
    batch_seconds: list[float] = []
    batch_sizes: list[int] = []
    _reset_peak_memory(adapter.device)
    start = time.perf_counter()
    with tqdm(total=len(dataset), desc=description, unit="img", disable=not progress, leave=False) as bar:
        for items in prefetched(decoded_batches(dataset, batch_size)):
            tick = time.perf_counter()
            safe = _detect(adapter, items, n_classes, counts)
            batch_seconds.append(time.perf_counter() - tick)
            batch_sizes.append(len(items))
            detections.update((item.image_id, s) for item, s in zip(items, safe))
            bar.update(len(items))
    _synchronize(adapter.device)
    seconds = time.perf_counter() - start
    return InferenceResult(detections, counts, seconds, batch_seconds, batch_sizes, _peak_memory_mb(adapter.device))
