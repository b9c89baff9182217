"""The inference loop of a :class:`~pytest_rf100vl.adapters.base.Pipelined` model: the stages
of consecutive batches overlap, so that a GPU never waits for the host (``docs/scale.md``).

While the model runs batch n on the device,

- a staging thread prepares batch n+1 (its pixels copied to the device and preprocessed
  there), having been handed it after the answer cache was asked on this thread;
- batch n-1 is collected (thresholds, NMS, one copy back) on a second CUDA stream of high
  priority, which waits for batch n-1's forward only, not for batch n's;
- decoding threads (:func:`~pytest_rf100vl.engine.runner.decoded_batches`) decode further ahead.

A batch's detections are those of the model's ``predict`` on it: the stages are the same calls in
the same order. A batch any stage of which raised is run again through ``predict``, image by
image where it still fails, so a model that fails on one image costs that image only. On CPU
the streams are plain calls and the stages still overlap on their threads.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

from pytest_rf100vl.adapters.base import Adapter, Detections, ImageItem
from pytest_rf100vl.adapters.model import Model, as_model

PREPARED_AHEAD = 2
"""Batches prepared ahead of the one the model runs (each holds its pixels on the device)."""


def pipelines(model: Model | Adapter) -> bool:
    """Whether the runner overlaps the model's stages (:attr:`Model.pipelined`)."""
    return as_model(model).pipelined is not None


class Streams:
    """The CUDA streams of the loop: the current one runs preparing and the forward, a second one
    of high priority collects; on any other device both are plain calls."""

    def __init__(self, device: str):
        torch = sys.modules.get("torch")
        self.torch = torch if torch is not None and device.startswith("cuda") and torch.cuda.is_available() else None
        if self.torch is not None:
            self.device = self.torch.device(device)
            self.collecting = self.torch.cuda.Stream(self.device, priority=-1)

    def launched(self) -> Any:
        """A mark of the work queued so far on the current stream (``None`` off CUDA)."""
        if self.torch is None:
            return None
        event = self.torch.cuda.Event()
        event.record(self.torch.cuda.current_stream(self.device))
        return event

    @contextmanager
    def collect_after(self, mark: Any) -> Iterator[None]:
        """Run the block on the collecting stream, once the work before ``mark`` is done; the
        block's work is finished when it ends, raising or not (its inputs may then be freed)."""
        if self.torch is None or mark is None:
            yield
            return
        try:
            with self.torch.cuda.stream(self.collecting):
                self.collecting.wait_event(mark)
                yield
        finally:
            self.collecting.synchronize()


@dataclass
class _Batch:
    """A batch on its way through the stages: its images, what the answer cache knew of them,
    those the model is asked about, and what the last stage made of them (or how it failed)."""

    items: list[ImageItem]
    known: dict[int, Detections]
    asked: list[ImageItem]
    value: Any = None
    failed: bool = False
    began: float = 0.0
    mark: Any = None


def _staged(batches: Iterable[list[ImageItem]], lookup: Callable[[list[ImageItem]], dict[int, Detections]],
            prepare: Callable[[list[ImageItem]], Any]) -> Iterator[_Batch]:
    """Each batch, in order, with ``prepare(asked)`` run ahead on a staging thread; the answer
    cache is asked (``lookup``) on this thread, as the batch is handed over."""
    stager = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rf100vl-prepare")

    def hand_over(items: list[ImageItem]) -> tuple[_Batch, Future[Any] | None]:
        known = lookup(items)
        batch = _Batch(items, known, [item for item in items if item.image_id not in known])
        return batch, stager.submit(prepare, batch.asked) if batch.asked else None

    iterator = iter(batches)
    try:
        pending = deque(hand_over(items) for items in islice(iterator, PREPARED_AHEAD))
        while pending:
            batch, future = pending.popleft()
            following = next(iterator, None)
            if following is not None:
                pending.append(hand_over(following))
            if future is not None:
                try:
                    batch.value = future.result()
                except Exception:  # run again through predict, image by image where it still fails
                    batch.failed = True
            yield batch
    finally:
        stager.shutdown(wait=True, cancel_futures=True)


def pipelined_loop(
    model: Model,
    batches: Iterable[list[ImageItem]],
    lookup: Callable[[list[ImageItem]], dict[int, Detections]],
    settle: Callable[[list[ImageItem], dict[int, Detections], Callable[[list[ImageItem]], list[Detections]]], None],
    called: Callable[[float, int, int], None],
) -> None:
    """Run every batch through the model's stages, overlapped as the module says.

    ``lookup(items)`` gives the answers the cache knows; ``settle(items, known, predict)``
    makes a batch's answers safe and keeps them, asking ``predict`` for the images not
    ``known`` (it answers the batch itself with what the stages gave, and calls the model
    for any other, as when the batch is re-run image by image); ``called(began, images, cached)``
    records each batch once settled."""
    detector = model.pipelined
    assert detector is not None
    streams = Streams(model.device)
    in_flight: _Batch | None = None
    for batch in _staged(batches, lookup, detector.prepare):
        batch.began = time.perf_counter()
        if batch.asked and not batch.failed:
            try:
                batch.value = detector.launch(batch.value)
                batch.mark = streams.launched()
            except Exception:
                batch.failed = True
        if in_flight is not None:
            _finish(detector, in_flight, streams, settle, called)
        in_flight = batch
    if in_flight is not None:
        _finish(detector, in_flight, streams, settle, called)


def _finish(detector: Any, batch: _Batch, streams: Streams, settle: Callable[..., None],
            called: Callable[[float, int, int], None]) -> None:
    found: list[Detections] | None = None
    if batch.asked and not batch.failed:
        try:
            with streams.collect_after(batch.mark):
                found = detector.collect(batch.value)
        except Exception:
            found = None
    batch.value = None  # the device memory of its outputs goes back before the next batch

    def predict(items: list[ImageItem]) -> list[Detections]:
        if found is not None and len(items) == len(batch.asked) and all(a is b for a, b in zip(items, batch.asked)):
            return found
        return detector.predict(items)

    settle(batch.items, batch.known, predict)
    called(batch.began, len(batch.asked), len(batch.items) - len(batch.asked))
