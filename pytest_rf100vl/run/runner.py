"""Inference over one split: decoding overlaps the model, every output is made safe to score,
and a model that fails on an image costs that image, not the run.

The loop times itself (wall clock and per batch), so throughput is recorded whether or not
pytest-benchmark is timing it too. One loop serves RF100-VL detection (:func:`run_inference`)
and UOUO grounding (:func:`run_grounding`).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rf100vl_hf.boxes import Sanitized, sanitize_detections
from rf100vl_hf.images import open_rgb

from pytest_rf100vl.adapters.base import Adapter, Detections, GroundingAnswer, GroundingQuery, ImageItem

if TYPE_CHECKING:
    import datasets

T = TypeVar("T")
R = TypeVar("R")
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
class Timing:
    """How long a loop took, in all and per batch, and its peak GPU memory (``None`` off CUDA)."""

    seconds: float
    batch_seconds: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    peak_gpu_memory_mb: float | None = None

    @property
    def n_images(self) -> int:
        return sum(self.batch_sizes)

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


@dataclass
class InferenceResult:
    """Safe detections per image id, what making them safe took, and how long it took."""

    detections: dict[int, Sanitized]
    counts: OutputCounts
    timing: Timing

    @property
    def n_images(self) -> int:
        return len(self.detections)


@dataclass
class GroundingResult:
    """Each mosaic's answer, in row order (a mosaic the adapter failed on has neither box nor
    quadrant), why each failed mosaic failed (mosaic id -> one line), and how long it took."""

    answers: list[GroundingAnswer]
    errors: dict[int, str]
    counts: OutputCounts
    timing: Timing


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


def decoded_batches(
    dataset: "datasets.Dataset", batch_size: int, id_column: str = "image_id", name_column: str | None = "file_name"
) -> Iterator[list[ImageItem]]:
    """Batches of RGB images, decoded from the original file bytes with ``open_rgb``; without
    a ``name_column`` an image is named by its stored path (UOUO: ``mosaic_000005.png``)."""
    import datasets

    columns = ["image", id_column] + ([name_column] if name_column else [])
    rows = dataset.select_columns(columns).cast_column("image", datasets.Image(decode=False))
    for batch in rows.iter(batch_size):
        names = batch[name_column] if name_column else [image["path"] or "" for image in batch["image"]]
        yield [
            ImageItem(open_rgb(image["bytes"] or Path(image["path"]).read_bytes()), int(image_id), name)
            for image, image_id, name in zip(batch["image"], batch[id_column], names)
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


def isolated(run: Callable[[list[T]], list[R]], batch: list[T], fail: Callable[[T, Exception], R]) -> list[R]:
    """``run(batch)``; when it raises, each element is run alone, and ``fail`` answers for an
    element that still raises: a model that fails on one image costs that image only."""
    try:
        return run(batch)
    except Exception as error:
        if len(batch) > 1:
            return [result for element in batch for result in isolated(run, [element], fail)]
        return [fail(batch[0], error)]


def _same_length(outputs: list[Any], batch: list[Any], method: str) -> None:
    if len(outputs) != len(batch):
        raise ValueError(f"{method} returned {len(outputs)} results for {len(batch)} images")


def _detect(adapter: Adapter, items: list[ImageItem], n_classes: int, counts: OutputCounts) -> list[Sanitized]:
    """The adapter's safe output for a batch; an image it fails on gets no detections and is counted."""

    def run(batch: list[ImageItem]) -> list[Sanitized]:
        outputs = adapter.predict(batch)
        _same_length(outputs, batch, "predict")
        scratch = OutputCounts()  # repairs count only once the whole batch succeeded
        safe = [make_safe(d, item, n_classes, scratch) for d, item in zip(outputs, batch)]
        counts.add_repairs(scratch)
        return safe

    def fail(item: ImageItem, error: Exception) -> Sanitized:
        counts.fail(item, error)
        return make_safe(Detections.empty(), item, n_classes, counts)

    return isolated(run, items, fail)


def _ground(
    adapter: Adapter, asked: list[tuple[ImageItem, GroundingQuery]], counts: OutputCounts, errors: dict[int, str]
) -> list[GroundingAnswer]:
    """The adapter's answers for a batch of mosaics; a mosaic it fails on gets an empty
    answer (scored as a parse failure) and is counted."""

    def run(batch: list[tuple[ImageItem, GroundingQuery]]) -> list[GroundingAnswer]:
        answers = adapter.ground([item for item, _ in batch], [query for _, query in batch])
        _same_length(answers, batch, "ground")
        wrong = [type(answer).__name__ for answer in answers if not isinstance(answer, GroundingAnswer)]
        if wrong:
            raise TypeError(f"ground returned {wrong[0]} where a GroundingAnswer was expected")
        return list(answers)

    def fail(element: tuple[ImageItem, GroundingQuery], error: Exception) -> GroundingAnswer:
        counts.fail(element[0], error)
        errors[element[0].image_id] = f"{type(error).__name__}: {error}"
        return GroundingAnswer(None, None)

    return isolated(run, asked, fail)


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


def _timed(
    batches: Iterable[list[ImageItem]],
    total: int,
    step: Callable[[list[ImageItem]], None],
    device: str,
    progress: bool,
    description: str | None,
) -> Timing:
    """Feed each batch (decoded ahead by a worker thread) to ``step``, timing every call."""
    from tqdm.auto import tqdm

    batch_seconds: list[float] = []
    batch_sizes: list[int] = []
    _reset_peak_memory(device)
    start = time.perf_counter()
    with tqdm(total=total, desc=description, unit="img", disable=not progress, leave=False) as bar:
        for items in prefetched(batches):
            tick = time.perf_counter()
            step(items)
            batch_seconds.append(time.perf_counter() - tick)
            batch_sizes.append(len(items))
            bar.update(len(items))
    _synchronize(device)
    return Timing(time.perf_counter() - start, batch_seconds, batch_sizes, _peak_memory_mb(device))


def run_inference(
    adapter: Adapter,
    dataset: "datasets.Dataset",
    batch_size: int = 1,
    progress: bool = True,
    description: str | None = None,
) -> InferenceResult:
    """Run ``adapter`` (its task already set) over every image of ``dataset``."""
    assert adapter.task is not None, "set_task must be called before run_inference"
    n_classes = len(adapter.task.classes)
    counts = OutputCounts()
    detections: dict[int, Sanitized] = {}

    def step(items: list[ImageItem]) -> None:
        safe = _detect(adapter, items, n_classes, counts)
        detections.update((item.image_id, s) for item, s in zip(items, safe))

    timing = _timed(decoded_batches(dataset, batch_size), len(dataset), step, adapter.device, progress, description)
    return InferenceResult(detections, counts, timing)


def run_grounding(
    adapter: Adapter,
    dataset: "datasets.Dataset",
    queries: list[GroundingQuery],
    batch_size: int = 1,
    progress: bool = True,
    description: str | None = None,
) -> GroundingResult:
    """Ask ``adapter`` each mosaic's question (``queries``, in row order) over a UOUO split."""
    if len(queries) != len(dataset):
        raise ValueError(f"{len(queries)} questions for {len(dataset)} mosaics")
    counts = OutputCounts()
    errors: dict[int, str] = {}
    answers: list[GroundingAnswer] = []

    def step(items: list[ImageItem]) -> None:
        asked = queries[len(answers) : len(answers) + len(items)]
        answers.extend(_ground(adapter, list(zip(items, asked)), counts, errors))

    batches = decoded_batches(dataset, batch_size, id_column="mosaic_id", name_column=None)
    timing = _timed(batches, len(dataset), step, adapter.device, progress, description)
    return GroundingResult(answers, errors, counts, timing)


def run_once(infer: Callable[[], T], benchmark: Any = None) -> T:
    """``infer()``, once; with ``benchmark`` (pytest-benchmark's fixture) under its clock."""
    if benchmark is None:
        return infer()
    return benchmark.pedantic(infer, rounds=1, iterations=1, warmup_rounds=0)
