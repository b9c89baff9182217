"""Inference over one split: decoding overlaps the model, every output is made safe to score,
and a model that fails on an image costs that image, not the run.

The loop times itself (wall clock and per batch), so throughput is recorded whether or not
pytest-benchmark is timing it too. One loop (:func:`run_split`) serves every benchmark: a
split's images are detected (``Model.predict``), or, when each has a question, grounded
(``Model.ground``); :func:`answer` runs the scoring round and the timing rounds. The loop
talks to the session's :class:`~pytest_rf100vl.adapters.model.Model` of a model (a built
adapter given directly is wrapped in one).
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rf100vl_hf.arrow import arrow_columns
from rf100vl_hf.boxes import Sanitized, sanitize_detections
from rf100vl_hf.images import open_rgb
from rf100vl_hf.progress import progress_bar

from pytest_rf100vl.adapters.base import Adapter, Detections, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.model import Model, as_model
from pytest_rf100vl.engine.pipeline import pipelined_loop, pipelines

if TYPE_CHECKING:
    import datasets

    from pytest_rf100vl.engine.answers import PairAnswers

T = TypeVar("T")
R = TypeVar("R")
_END = object()
DECODE_WORKERS = max(1, min(4, os.cpu_count() or 1))
"""Decoding threads of the inference loop (each decodes a whole batch)."""
WARMUP_BATCHES = 2
"""Model calls timed apart from the throughput by default (the loop key ``warmup-batches``)."""


@dataclass
class OutputCounts:
    """What it took to make a model's output scoreable; reported with every result."""

    dropped: int = 0  # NaN/inf box or score, or a label that is not a class index
    clipped: int = 0  # boxes reaching outside the image, clipped to it
    swapped: int = 0  # boxes given with x1 < x0 or y1 < y0, whose corners were put in order
    truncated: int = 0  # beyond the best MAX_DETECTIONS of an image and class
    failed_images: int = 0  # the adapter raised (or answered wrongly) for the image
    first_error: str | None = None  # traceback of the first failure

    def fail(self, item: ImageItem, error: BaseException) -> None:
        self.failed_images += 1
        if self.first_error is None:
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self.first_error = f"image {item.image_id} ({item.file_name}):\n{trace}"

    def add_repairs(self, other: "OutputCounts") -> None:
        """Take on the repairs counted in ``other`` (kept apart until a whole batch succeeded)."""
        for name, count in other.repairs().items():
            setattr(self, name, getattr(self, name) + count)

    def repairs(self) -> dict[str, int]:
        """The repairs counted (not the failures)."""
        return {"dropped": self.dropped, "clipped": self.clipped, "swapped": self.swapped, "truncated": self.truncated}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Timing:
    """How long a loop took, in all and per model call, and its peak GPU memory (``None`` off CUDA).

    The first ``warmup_batches`` model calls (kernel selection, lazy allocation, caches
    filling) are timed apart: ``warmup_seconds`` is the wall time from the start through the
    last of them, and the throughput and latencies are those of the steady state after it.
    Images answered from the answer cache count in ``n_images`` but not in the throughput.
    """

    seconds: float
    batch_seconds: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    peak_gpu_memory_mb: float | None = None
    warmup_batches: int = 0
    warmup_seconds: float = 0.0
    cached_images: int = 0
    batch_size: int = 1  # images per model call the loop ran with (``auto`` resolved)

    @property
    def n_images(self) -> int:
        return sum(self.batch_sizes) + self.cached_images

    @property
    def images_per_s(self) -> float:
        """Images the model answered per second of steady state (wall clock, decoding included)."""
        steady = self.seconds - self.warmup_seconds
        images = sum(self.batch_sizes[self.warmup_batches :])
        return images / steady if images and steady > 0 else float("nan")

    def compile_seconds(self) -> float:
        """The warm-up's time beyond what its calls take in the steady state (the median
        steady call's time each): what ``torch.compile`` (and any other first-call cost) took."""
        steady = self.batch_seconds[self.warmup_batches:]
        typical = float(np.median(steady)) if steady else 0.0
        return max(0.0, self.warmup_seconds - typical * self.warmup_batches)

    def latency_ms(self) -> dict[str, float]:
        """p50 and p95 latency of a steady-state batch, and of an image (a batch's time over its size)."""
        steady = slice(self.warmup_batches, None)
        if not self.batch_seconds[steady]:
            return {}
        batch = np.asarray(self.batch_seconds[steady]) * 1000
        image = batch / np.asarray(self.batch_sizes[steady])
        return {
            "latency_batch_p50_ms": float(np.percentile(batch, 50)),
            "latency_batch_p95_ms": float(np.percentile(batch, 95)),
            "latency_image_p50_ms": float(np.percentile(image, 50)),
            "latency_image_p95_ms": float(np.percentile(image, 95)),
        }


@dataclass
class Answers:
    """What a model answered over a split: detections made safe, by image id (detection), or
    each image's grounding answer in row order (``grounding``; an image the model failed on has
    an empty answer, and ``errors`` says why, by image id); what making the output safe took,
    how long it took, every timed round (the scoring one first), what the adapter counted in its
    answers over the scoring round, and with ``LoopOptions.samples`` the samples log's lines of
    a model that answers in text, in split order (:mod:`~pytest_rf100vl.engine.sample_log`)."""

    counts: OutputCounts
    timing: Timing
    detections: dict[int, Sanitized] = field(default_factory=dict)
    grounding: list[GroundingAnswer] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    rounds: list[Timing] = field(default_factory=list)
    answer_counts: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] | None = None

    @property
    def n_images(self) -> int:
        return self.timing.n_images


def decoded_ahead(raw: Iterable[T], decode: Callable[[T], R], workers: int = DECODE_WORKERS) -> Iterator[R]:
    """``decode(item)`` for each item of ``raw``, in order, by a pool of ``workers`` threads
    that keeps ``2 * workers`` items in flight ahead of the consumer.

    Decoding (PIL releases the GIL) then runs while the model works on earlier batches; one
    thread was the bottleneck of a fast model on large images (``benchmarks/test_feeding.py``).
    """
    iterator = iter(raw)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rf100vl-decode")
    try:
        pending = deque(pool.submit(decode, item) for item in islice(iterator, 2 * workers))
        while pending:
            done = pending.popleft().result()
            following = next(iterator, _END)
            if following is not _END:
                pending.append(pool.submit(decode, following))
            yield done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


READ_ROWS = 64
"""Rows read from the Arrow table at a time (then cut into batches of the run's size)."""
RawBatch = list[tuple[bytes, int, str]]
"""A batch as stored: each image's file bytes, its id and its name."""


def raw_batches(
    dataset: "datasets.Dataset", batch_size: int, id_column: str = "image_id", name_column: str | None = "file_name"
) -> Iterator[RawBatch]:
    """Batches of undecoded images (the image column's stored bytes, or its file); without a
    ``name_column`` an image is named by its stored path (UOUO: ``mosaic_000005.png``)."""
    rows = arrow_columns(dataset, ["image", id_column] + ([name_column] if name_column else []))
    batch: RawBatch = []
    for chunk in rows.to_batches(max(batch_size, READ_ROWS)):  # reading row by row costs more than decoding
        images = chunk.column("image").to_pylist()
        names = chunk.column(name_column).to_pylist() if name_column else [image["path"] or "" for image in images]
        for image, image_id, name in zip(images, chunk.column(id_column).to_pylist(), names):
            batch.append((image["bytes"] or Path(image["path"]).read_bytes(), int(image_id), name))
            if len(batch) == batch_size:
                yield batch
                batch = []
    if batch:
        yield batch


def decode_batch(batch: RawBatch) -> list[ImageItem]:
    """RGB images of a raw batch, decoded from the original file bytes with ``open_rgb`` (the
    bytes travel along, for adapters that send files rather than pixels)."""
    return [ImageItem(open_rgb(data), image_id, name, data) for data, image_id, name in batch]


def decoded_batches(
    dataset: "datasets.Dataset", batch_size: int, id_column: str = "image_id", name_column: str | None = "file_name"
) -> Iterator[list[ImageItem]]:
    """Batches of RGB images, decoded by a pool of threads ahead of the consumer."""
    return decoded_ahead(raw_batches(dataset, batch_size, id_column, name_column), decode_batch)


def _outside(boxes: np.ndarray, width: int, height: int) -> int:
    """How many boxes reach outside the image (they will be clipped)."""
    limits = np.array([width, height, width, height])
    return int(((boxes < 0) | (boxes > limits)).any(axis=1).sum())


def make_safe(
    detections: Detections, item: ImageItem, n_classes: int, counts: OutputCounts, clip: bool = True
) -> Sanitized:
    """One image's output, cleaned by ``sanitize_detections``; labels outside the classes are
    dropped. ``clip=False`` for a submission scored as submitted (boxes kept as given)."""
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
    if clip:
        counts.clipped += _outside(boxes[valid & finite], width, height)
    counts.dropped += int((~valid).sum())
    safe = sanitize_detections(boxes[valid], scores[valid], labels[valid].astype(np.int64), width, height, clip=clip)
    counts.dropped += safe.non_finite
    counts.swapped += safe.swapped
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


Element = tuple[ImageItem, "GroundingQuery | None"]
"""An image of the split, with its question when the model is asked to ground rather than detect."""
Call = Callable[[list[Element]], list[Any]]
"""A call of the model over elements (``predict``, or ``ground`` with the elements' questions)."""
Samples = dict[int, dict[str, Any]]
"""The samples log's lines of a pair so far, by image (mosaic) id."""


def _error_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


class _Detecting:
    """How a split's detections are settled: each image's output made safe to score
    (``clip=False`` for a submission scored as submitted), repairs counted once the whole batch
    they came in was made safe; an image the model fails on gets no detections."""

    kind = Detections
    method = "predict"

    def __init__(self, classes: list[str], clip: bool):
        self.classes = classes
        self.clip = clip

    def call(self, model: Model) -> Call:
        return lambda elements: model.predict([item for item, _ in elements])

    def safe(self, elements: list[Element], outputs: list[Detections], counts: OutputCounts,
             known: dict[int, Any], samples: Samples | None) -> list[Sanitized]:
        from pytest_rf100vl.engine.sample_log import detection_sample

        repairs = [OutputCounts() for _ in elements]
        safe = [make_safe(output, item, len(self.classes), own, self.clip)
                for (item, _), output, own in zip(elements, outputs, repairs)]
        for own in repairs:
            counts.add_repairs(own)
        if samples is not None:
            for (item, _), output, made, own in zip(elements, outputs, safe, repairs):
                samples[item.image_id] = detection_sample(item, output, made, own.repairs(), self.classes,
                                                          item.image_id in known)
        return safe

    def failed(self, element: Element, error: Exception, counts: OutputCounts, samples: Samples | None) -> Sanitized:
        from pytest_rf100vl.engine.sample_log import detection_sample

        item = element[0]
        made = make_safe(Detections.empty(), item, len(self.classes), counts)
        if samples is not None:
            samples[item.image_id] = detection_sample(item, None, made, OutputCounts().repairs(), self.classes, False,
                                                      _error_line(error))
        return made


class _Grounding:
    """How a split's grounding answers are settled: each must be a ``GroundingAnswer``; an image
    the model fails on gets an empty one (scored as a parse failure)."""

    kind = GroundingAnswer
    method = "ground"

    def call(self, model: Model) -> Call:
        return lambda elements: model.ground([item for item, _ in elements],
                                               [query for _, query in elements])  # type: ignore[misc]

    def safe(self, elements: list[Element], outputs: list[Any], counts: OutputCounts, known: dict[int, Any],
             samples: Samples | None) -> list[GroundingAnswer]:
        from pytest_rf100vl.engine.sample_log import grounding_sample

        wrong = [type(answer).__name__ for answer in outputs if not isinstance(answer, GroundingAnswer)]
        if wrong:
            raise TypeError(f"ground returned {wrong[0]} where a GroundingAnswer was expected")
        if samples is not None:
            for (item, query), answer in zip(elements, outputs):
                samples[item.image_id] = grounding_sample(item, query, answer, item.image_id in known)
        return outputs

    def failed(self, element: Element, error: Exception, counts: OutputCounts,
               samples: Samples | None) -> GroundingAnswer:
        from pytest_rf100vl.engine.sample_log import grounding_sample

        if samples is not None:
            samples[element[0].image_id] = grounding_sample(*element, GroundingAnswer(None, None), False,
                                                            _error_line(error))
        return GroundingAnswer(None, None)


def _settled(
    way: "_Detecting | _Grounding",
    call: Call,
    elements: list[Element],
    counts: OutputCounts,
    errors: dict[int, str],
    answers: "PairAnswers[Any] | None" = None,
    known: dict[int, Any] | None = None,
    samples: Samples | None = None,
) -> list[Any]:
    """The model's output for a batch, settled ``way`` (``call``: the adapter's, or an answer
    already asked for on another thread); an image it fails on is counted and gets ``way``'s
    empty answer. Images in ``known`` (cached answers) are not asked again; the others'
    answers go to ``answers`` once their whole batch was settled, and each image's line to
    ``samples`` when it is given."""
    known = known or {}

    def run(batch: list[Element]) -> list[Any]:
        asked = [element for element in batch if element[0].image_id not in known]
        fresh = call(asked) if asked else []
        _same_length(fresh, asked, way.method)
        answered = dict(zip((item.image_id for item, _ in asked), fresh))
        outputs = [known.get(item.image_id, answered.get(item.image_id)) for item, _ in batch]
        settled = way.safe(batch, outputs, counts, known, samples)
        if answers is not None:
            for (item, _), output in zip(asked, fresh):
                answers.keep(item, output)
        return settled

    def fail(element: Element, error: Exception) -> Any:
        counts.fail(element[0], error)
        errors[element[0].image_id] = _error_line(error)
        return way.failed(element, error, counts, samples)

    return isolated(run, elements, fail)


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


@dataclass(frozen=True)
class Rounds:
    """How long throughput is timed for (the session takes ``max_time`` and ``min_rounds`` from
    pytest-benchmark's ``--benchmark-max-time`` and ``--benchmark-min-rounds``): a split whose
    steady state took under ``max_time`` seconds is run again (answer cache off, output
    discarded) until its rounds add up to ``max_time`` and number at least ``min_rounds``, or
    ``max_rounds`` were run. Unlike a micro-benchmark, a split that took ``max_time`` or longer
    runs once: its one round is scored and timed."""

    max_time: float = 1.0
    min_rounds: int = 5
    max_rounds: int = 10


@dataclass(frozen=True)
class LoopOptions:
    """How the inference loop runs, beside the batch size: how many model calls are warm-up,
    the answer cache folder (``None``: no cache), how long throughput is timed for, and whether
    to keep the samples log of a model that answers in text (the scoring round's only)."""

    warmup_batches: int = WARMUP_BATCHES
    cache: Path | None = None
    rounds: Rounds = Rounds()
    samples: bool = False


class _Clock:
    """What a driver records of the model calls of a loop: when each returned, how long it
    took and for how many images, and how many images the answer cache answered instead."""

    def __init__(self, device: str, overlapped: bool = False):
        self.device = device
        self.overlapped = overlapped
        self.batch_seconds: list[float] = []
        self.batch_sizes: list[int] = []
        self.began: list[float] = []
        self.ends: list[float] = []
        self.cached = 0
        _reset_peak_memory(device)
        self.start = time.perf_counter()

    def called(self, began: float, images: int) -> None:
        self.began.append(began)
        self.ends.append(time.perf_counter())
        self.batch_seconds.append(self.ends[-1] - began)
        self.batch_sizes.append(images)

    def timing(self, warmup: int) -> Timing:
        """The loop's :class:`Timing`: the first ``warmup`` calls to return (at most all but the
        last) are the warm-up. It ends when the last of them returns, or, where calls overlap
        (a pipeline launches a batch before it collects the one before), when the first steady
        call began: the steady state then never leaves out work done for its own batches."""
        _synchronize(self.device)
        seconds = time.perf_counter() - self.start
        warmed = max(0, min(warmup, len(self.ends) - 1))
        warmup_seconds = 0.0
        if warmed:
            boundary = self.began[warmed] if self.overlapped else self.ends[warmed - 1]
            warmup_seconds = boundary - self.start
        return Timing(seconds, self.batch_seconds, self.batch_sizes, _peak_memory_mb(self.device), warmed,
                      warmup_seconds, self.cached)


def _timed(
    batches: Iterable[list[T]],
    total: int,
    step: Callable[[list[T]], int],
    device: str,
    progress: bool,
    description: str | None,
    warmup: int = WARMUP_BATCHES,
) -> Timing:
    """Feed each batch (decoded ahead by :func:`decoded_batches`) to ``step``, which returns
    how many of its images it sent to the model; each call that sent some is timed, and the
    first ``warmup`` of them (at most all but the last) are the warm-up (:class:`Timing`).
    The bar is huggingface_hub's (``rf100vl_hf.progress``), so the
    plugin's live line follows it."""

    clock = _Clock(device)
    with progress_bar(total=total, desc=description, unit="img", disable=not progress, leave=False) as bar:
        for items in batches:
            tick = time.perf_counter()
            sent = step(items)
            clock.cached += len(items) - sent
            if sent:
                clock.called(tick, sent)
            bar.update(len(items))
    return clock.timing(warmup)


def _timed_pipeline(
    model: Model,
    batches: Iterable[list[ImageItem]],
    total: int,
    lookup: Callable[[list[ImageItem]], dict[int, Detections]],
    settle: Callable[[list[ImageItem], dict[int, Detections], Callable[[list[ImageItem]], list[Detections]]], None],
    progress: bool,
    description: str | None,
    warmup: int = WARMUP_BATCHES,
) -> Timing:
    """:func:`~pytest_rf100vl.engine.pipeline.pipelined_loop` under the loop's clock: each batch is
    timed from its forward's launch to its detections kept."""

    clock = _Clock(model.device, overlapped=True)
    with progress_bar(total=total, desc=description, unit="img", disable=not progress, leave=False) as bar:
        def called(began: float, sent: int, cached: int) -> None:
            clock.cached += cached
            if sent:
                clock.called(began, sent)
            bar.update(sent + cached)

        pipelined_loop(model, batches, lookup, settle, called)
    return clock.timing(warmup)


def _timed_concurrently(
    batches: Iterable[list[T]],
    total: int,
    lookup: Callable[[list[T]], list[T]],
    ask: Callable[[T], Any],
    settle: Callable[[T, "Future[Any]"], None],
    concurrency: int,
    device: str,
    progress: bool,
    description: str | None,
    warmup: int = WARMUP_BATCHES,
) -> Timing:
    """The loop for a model behind a server: ``lookup`` settles what the answer cache knows of
    a batch and returns the rest; each of those is one call, ``ask(unit)``, on a pool of
    ``concurrency`` threads, and is settled on this thread the moment it returns
    (``settle(unit, future)``), whatever the order: a slow request holds back no other.
    Each call is timed from its start to its return."""

    clock = _Clock(device)
    pending: dict[Future[Any], tuple[T, float]] = {}

    def settle_done(block: bool) -> None:
        done, _ = wait(pending, return_when=FIRST_COMPLETED) if block else (
            [future for future in pending if future.done()], None)
        for future in done:
            unit, began = pending.pop(future)
            clock.called(began, 1)
            settle(unit, future)
            bar.update(1)

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rf100vl-call")
    with progress_bar(total=total, desc=description, unit="img", disable=not progress, leave=False) as bar:
        try:
            for units in batches:
                rest = lookup(units)
                clock.cached += len(units) - len(rest)
                bar.update(len(units) - len(rest))
                for unit in rest:
                    while len(pending) >= concurrency:
                        settle_done(block=True)
                    pending[pool.submit(ask, unit)] = (unit, time.perf_counter())
                settle_done(block=False)
            while pending:
                settle_done(block=True)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return clock.timing(warmup)


def largest_image(dataset: "datasets.Dataset", id_column: str, name_column: str | None) -> ImageItem:
    """The split's image with the most pixels (by its ``width`` and ``height`` columns when it
    has them, else its first), decoded."""
    position = 0
    if {"width", "height"} <= set(dataset.column_names):
        areas = [w * h for w, h in zip(dataset["width"], dataset["height"])]
        position = max(range(len(areas)), key=areas.__getitem__)
    (batch,) = raw_batches(dataset.select([position]), 1, id_column, name_column)
    return decode_batch(batch)[0]


def _batch_size(
    model: Model, requested: int | str, dataset: "datasets.Dataset", columns: tuple[str, str | None],
    ask: Callable[[list[ImageItem]], Any],
) -> int:
    """Images per model call: ``requested``, or for ``auto`` the size found once per model by
    asking ``ask`` batches of copies of the split's largest image (``engine/batch_size.py``); one
    for a model called image by image from several threads."""
    from pytest_rf100vl.engine.batch_size import batch_size_for, copies

    if model.concurrency > 1:
        return 1
    probe: list[ImageItem] = []

    def run(size: int) -> Any:
        probe[:] = probe or [largest_image(dataset, *columns)]
        return ask(copies(probe[0], size))

    return batch_size_for(model, requested, run)


def run_split(
    adapter: Model | Adapter,
    images: "datasets.Dataset",
    questions: "Sequence[GroundingQuery] | None" = None,
    batch_size: int | str = 1,
    progress: bool = True,
    description: str | None = None,
    loop: LoopOptions = LoopOptions(),
    columns: tuple[str, str | None] = ("image_id", "file_name"),
) -> Answers:
    """Run ``adapter`` over every image of ``images`` (its ``columns``: the id and name
    columns), ``batch_size`` images per call (a number, or ``auto``): detect (its task already
    set), or with ``questions`` (one per image, in row order) ground. A model with
    :attr:`~pytest_rf100vl.adapters.model.Model.concurrency` above 1 is called one image at a
    time from that many threads, and a :class:`~pytest_rf100vl.adapters.base.Pipelined`
    detector through :mod:`~pytest_rf100vl.engine.pipeline`."""
    from pytest_rf100vl.engine.answers import open_answers

    model = as_model(adapter)

    if questions is not None and len(questions) != len(images):
        raise ValueError(f"{len(questions)} questions for {len(images)} images")
    if questions is None:
        assert model.task is not None, "set_task must be called before the model detects"
        way: _Detecting | _Grounding = _Detecting(list(model.task.classes), not model.entry.submitted_output)
    else:
        way = _Grounding()
    counts = OutputCounts()
    errors: dict[int, str] = {}
    settled: dict[int, Any] = {}  # image id -> its settled answer
    samples: Samples | None = {} if loop.samples and model.entry.answers_in_text else None
    cache = open_answers(loop.cache, model, way.kind)
    call = way.call(model)

    def found(elements: list[Element]) -> dict[int, Any]:
        if cache is None:
            return {}
        return cache.found([item for item, _ in elements], None if questions is None else [q for _, q in elements])

    def settle(elements: list[Element], ask: Call, known: dict[int, Any]) -> None:
        results = _settled(way, ask, elements, counts, errors, cache, known, samples)
        settled.update((item.image_id, result) for (item, _), result in zip(elements, results))

    def step(elements: list[Element]) -> int:
        known = found(elements)
        settle(elements, call, known)
        return len(elements) - len(known)

    def lookup(elements: list[Element]) -> list[Element]:
        known = found(elements)
        settle([e for e in elements if e[0].image_id in known], call, known)
        return [e for e in elements if e[0].image_id not in known]

    size = _batch_size(model, batch_size, images, columns,
                       lambda items: call([(item, None if questions is None else questions[0]) for item in items]))
    decoded = decoded_batches(images, size, *columns)
    batches = _with_questions(decoded, questions)
    try:
        if questions is None and pipelines(model):
            timing = _timed_pipeline(
                model, decoded, len(images),
                lambda items: found([(item, None) for item in items]),
                lambda items, known, predict: settle([(item, None) for item in items],
                                                     lambda elements: predict([item for item, _ in elements]), known),
                progress, description, loop.warmup_batches,
            )
        elif model.concurrency <= 1:
            timing = _timed(batches, len(images), step, model.device, progress, description, loop.warmup_batches)
        else:
            timing = _timed_concurrently(
                batches, len(images), lookup, lambda element: call([element]),
                lambda element, future: settle([element], lambda _: future.result(), {}),
                model.concurrency, model.device, progress, description, loop.warmup_batches,
            )
    finally:
        if cache is not None:
            cache.close()
    timing.batch_size = size
    ids = arrow_columns(images, [columns[0]]).column(0).to_pylist()
    in_order = None if samples is None else [samples[i] for i in ids]
    if questions is None:
        return Answers(counts, timing, detections=settled, errors=errors, samples=in_order)
    return Answers(counts, timing, grounding=[settled[i] for i in ids], errors=errors, samples=in_order)


def _with_questions(batches: Iterable[list[ImageItem]],
                    questions: "Sequence[GroundingQuery] | None") -> Iterator[list[Element]]:
    """Each batch's images with their questions, by position in the split (``None`` without)."""
    position = 0
    for items in batches:
        yield [(item, None if questions is None else questions[position + i]) for i, item in enumerate(items)]
        position += len(items)


def steady_seconds(timing: Timing) -> float:
    return timing.seconds - timing.warmup_seconds


def run_rounds(
    infer: Callable[[LoopOptions, str], Answers],
    loop: LoopOptions,
    benchmark: Any = None,
    repeatable: bool = True,
) -> tuple[Answers, list[Timing]]:
    """The scoring round (``infer(loop, "")``: answers cached and counted), then the timing
    rounds (``infer(loop without cache, " (timing round K)")``, the text for the progress line)
    :class:`Rounds` asks for, and the :class:`Timing` of every round. Not repeated: a model that
    is not ``repeatable`` (billed per request, a replayed file), a round answered from the
    answer cache (its throughput is the run's that computed the answers), and a run whose
    ``benchmark`` (pytest-benchmark's fixture) is disabled (``--benchmark-disable``: run once).
    With a ``benchmark``, pytest-benchmark's statistics are the rounds' seconds per image of
    steady state, so its table's median is the row's ``images_per_s`` inverted."""
    rounds = loop.rounds
    once = not repeatable or (benchmark is not None and not benchmark.enabled)

    def every_round() -> tuple[Answers, list[Timing]]:
        first = infer(loop, "")
        timings: list[Timing] = [first.timing]
        if once or first.timing.cached_images or steady_seconds(first.timing) >= rounds.max_time:
            return first, timings
        timing_loop = LoopOptions(loop.warmup_batches, None, rounds)  # no cache, no samples log
        while len(timings) < rounds.max_rounds and (
            sum(steady_seconds(t) for t in timings) < rounds.max_time or len(timings) < rounds.min_rounds
        ):
            timings.append(infer(timing_loop, f" (timing round {len(timings) + 1})").timing)
        return first, timings

    if benchmark is None:
        return every_round()
    first, timings = benchmark.pedantic(every_round, rounds=1, iterations=1, warmup_rounds=0)
    per_image = seconds_per_image(timings)
    if benchmark.stats and per_image:  # pytest-benchmark measured the whole; its table shows each round
        # pytest-benchmark 5.3 has no public way to record figures it did not time: pedantic times whole calls,
        # a count fixed in advance, with the session's one timer, and its hooks reach the JSON, not the table
        benchmark.stats.stats.data[:] = per_image
    return first, timings


def seconds_per_image(timings: list[Timing]) -> list[float]:
    """Each round's seconds per image of steady state (rounds without one left out): what
    pytest-benchmark's table shows, and the row's throughput is the inverse of their median."""
    return [1 / t.images_per_s for t in timings if not math.isnan(t.images_per_s) and t.images_per_s > 0]


def answer(
    adapter: Model | Adapter,
    images: "datasets.Dataset",
    questions: "Sequence[GroundingQuery] | None",
    batch_size: int | str,
    loop: LoopOptions,
    label: str,
    benchmark: Any = None,
    columns: tuple[str, str | None] = ("image_id", "file_name"),
) -> Answers:
    """The model's answers over a split (:func:`run_split`): the scoring round, then its timing
    rounds (:func:`run_rounds`), with what the adapter counted in its answers over the scoring
    round alone (a timing round asks again and would count again)."""
    model = as_model(adapter)
    before = model.answer_counts()
    counted: list[dict[str, int]] = []  # after the scoring round

    def infer(options: LoopOptions, round_label: str) -> Answers:
        answers = run_split(model, images, questions, batch_size, progress=False, description=label + round_label,
                            loop=options, columns=columns)
        if not counted:
            counted.append({name: n - before.get(name, 0) for name, n in model.answer_counts().items()})
        return answers

    first, rounds = run_rounds(infer, loop, benchmark, model.entry.repeatable)
    first.rounds = rounds
    first.answer_counts = counted[0]
    return first
