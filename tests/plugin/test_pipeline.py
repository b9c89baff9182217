"""The inference loop of a pipelined adapter (``engine/pipeline.py``): the next batch is prepared on
a staging thread and launched before the last one is collected, the detections are those of
``predict`` batch by batch, a stage that raises costs nothing but a re-run through ``predict``
(image by image where it still fails), and the answer cache is asked before a batch is prepared;
``--rf100vl-batch-size auto`` probes a GPU once per model and is 1 elsewhere."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pytest_rf100vl.adapters import create
from pytest_rf100vl.adapters.base import Adapter, Detections, DetectionTask, ImageItem, Pipelined
from pytest_rf100vl.engine import batch_size
from pytest_rf100vl.engine.pipeline import pipelines
from pytest_rf100vl.engine.runner import LoopOptions, run_split

from tests.plugin.test_concurrency import N, split


class Staged(Adapter):
    """A pipelined stand-in: image ``i`` gets one box ``[i, i, i + 5, i + 5]`` scored by the
    image's mean pixel; it records which thread ran each stage of which batch, in order, and
    raises in the stage named in ``fail`` for any batch holding the image ``fail_on``."""

    name = "staged"

    def __init__(self, fail: str | None = None, fail_on: int = 4, predict_fails: bool = False):
        super().__init__("stand-in")
        self.fail, self.fail_on, self.predict_fails = fail, fail_on, predict_fails
        self.events: list[tuple[str, tuple[int, ...], str]] = []
        self.lock = threading.Lock()

    def _record(self, stage: str, batch: list[ImageItem]) -> tuple[int, ...]:
        ids = tuple(item.image_id for item in batch)
        with self.lock:
            self.events.append((stage, ids, threading.current_thread().name))
        if stage == self.fail and self.fail_on in ids:
            raise RuntimeError(f"{stage} broke")
        return ids

    def prepare(self, batch: list[ImageItem]) -> Any:
        self._record("prepare", batch)
        return batch

    def launch(self, prepared: Any) -> Any:
        self._record("launch", prepared)
        return prepared

    def collect(self, launched: Any) -> list[Detections]:
        self._record("collect", launched)
        return [self._one(item) for item in launched]

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        self._record("predict", batch)
        if self.predict_fails and any(item.image_id == self.fail_on for item in batch):
            raise RuntimeError("predict broke too")
        return [self._one(item) for item in batch]

    @staticmethod
    def _one(item: ImageItem) -> Detections:
        i = item.image_id
        score = float(np.asarray(item.image).mean()) / 255
        return Detections(np.array([[i, i, i + 5.0, i + 5.0]]), np.array([score]), np.array([0]))


def _run(adapter: Adapter, size: int = 3, cache: Path | None = None):
    adapter.set_task(DetectionTask("toy", ["thing"]))
    return run_split(adapter, split(), None, size, progress=False, loop=LoopOptions(1, cache))


def _boxes(result) -> dict[int, tuple]:
    return {i: (safe.boxes.tolist(), safe.scores.tolist()) for i, safe in result.detections.items()}


def test_the_next_batch_is_prepared_aside_and_launched_before_the_last_is_collected() -> None:
    adapter = Staged()
    assert isinstance(adapter, Pipelined) and pipelines(adapter)
    result = _run(adapter)
    assert _boxes(result) == _boxes(_run(_plain(Staged()))) and result.counts.failed_images == 0
    batches = [tuple(range(start, start + 3)) for start in range(0, N, 3)]
    order = [(stage, ids) for stage, ids, _ in adapter.events]
    for earlier, later in zip(batches, batches[1:]):
        assert order.index(("launch", later)) < order.index(("collect", earlier))
    threads = {stage: {thread for s, _, thread in adapter.events if s == stage} for stage in ("prepare", "collect")}
    assert all(name.startswith("rf100vl-prepare") for name in threads["prepare"])
    assert threads["collect"] == {threading.main_thread().name}
    assert not [event for event in adapter.events if event[0] == "predict"]
    assert result.timing.batch_size == 3 and result.timing.batch_sizes == [3, 3, 3, 3]


def _plain(adapter: Staged) -> Adapter:
    """The same model without its stages: the loop then calls ``predict`` batch by batch."""

    class Plain(Adapter):
        name = "plain"

        def predict(self, batch: list[ImageItem]) -> list[Detections]:
            return adapter.predict(batch)

    plain = Plain("stand-in")
    assert not pipelines(plain)
    adapter.set_task(DetectionTask("toy", ["thing"]))
    return plain


@pytest.mark.parametrize("stage", ["prepare", "launch", "collect"])
def test_a_stage_that_raises_costs_a_rerun_through_predict_not_an_image(stage: str) -> None:
    adapter = Staged(fail=stage)
    result = _run(adapter)
    clean = _run(Staged())
    assert _boxes(result) == _boxes(clean) and result.counts.failed_images == 0
    reruns = [ids for name, ids, _ in adapter.events if name == "predict"]
    assert reruns == [(3, 4, 5)]  # only the batch whose stage broke


def test_an_image_predict_also_fails_on_is_the_only_one_lost() -> None:
    adapter = Staged(fail="launch", predict_fails=True)
    result = _run(adapter)
    assert result.counts.failed_images == 1 and "predict broke too" in result.counts.first_error
    assert len(result.detections[4].scores) == 0
    assert all(len(result.detections[i].scores) == 1 for i in range(N) if i != 4)


def test_the_answer_cache_is_asked_before_a_batch_is_prepared(tmp_path: Path) -> None:
    class Keyed(Staged):
        def answer_key_parts(self, query=None):
            return ("toy", "thing")

    first = Keyed()
    _run(first, cache=tmp_path)
    again = Keyed()
    result = _run(again, cache=tmp_path)
    assert again.events == [] and result.timing.cached_images == N
    assert _boxes(result) == _boxes(_run(Staged()))


def test_a_real_detector_scores_the_same_pipelined_as_batch_by_batch() -> None:
    adapter = create("owlv2:tiny")
    assert pipelines(adapter)
    adapter.set_task(DetectionTask("toy", ["cat", "dog"]))
    result = run_split(adapter, split(), None, 5, progress=False, loop=LoopOptions(1, None))
    rows = split()
    for start in range(0, N, 5):
        from pytest_rf100vl.engine.runner import decode_batch, raw_batches

        (raw,) = raw_batches(rows.select(range(start, min(start + 5, N))), 5)
        for item, found in zip(decode_batch(raw), adapter.predict(decode_batch(raw))):
            np.testing.assert_allclose(result.detections[item.image_id].scores, found.scores, rtol=0, atol=0)


class _FakeCuda:
    """``torch.cuda`` for the probe: a device of 100 units where a batch of ``n`` peaks at
    ``peak(n)`` units and runs out of memory above ``fits`` images."""

    OutOfMemoryError = torch.cuda.OutOfMemoryError

    def __init__(self, fits: int, peak):
        self.fits, self.peak, self.last = fits, peak, 0

    def is_available(self) -> bool:
        return True

    def get_device_properties(self, device):
        return type("Properties", (), {"total_memory": 100})()

    def max_memory_allocated(self, device) -> int:
        return self.peak(self.last)

    def empty_cache(self) -> None: ...

    def reset_peak_memory_stats(self, device) -> None: ...

    def synchronize(self, device) -> None: ...


@pytest.mark.parametrize(("fits", "peak", "found"), [
    (40, lambda n: n, 32),  # 64 runs out of memory
    (1000, lambda n: n, 64),  # 128 peaks past 80% of the device
    (1000, lambda n: 0, batch_size.LARGEST),  # nothing stops it before the largest it tries
    (0, lambda n: 0, 1),  # even one image does not fit: 1, and the run says so when it fails
])
def test_auto_batch_size_is_the_largest_that_fits_on_the_gpu_found_once(monkeypatch, fits, peak, found) -> None:
    fake = _FakeCuda(fits, peak)
    monkeypatch.setattr(torch, "cuda", fake)
    adapter = Staged()
    adapter.device = "cuda"
    type(adapter).transformers_model = True
    asked: list[int] = []

    def run(size: int) -> None:
        asked.append(size)
        fake.last = size
        if size > fake.fits:
            raise fake.OutOfMemoryError("out of memory")

    try:
        assert batch_size.batch_size_for(adapter, "auto", run) == found
        assert batch_size.batch_size_for(adapter, "auto", run) == found  # found once
    finally:
        type(adapter).transformers_model = False
    assert asked == [2**k for k in range(len(asked))] and len(asked) == len(set(asked))


def test_auto_batch_size_is_one_off_cuda_and_a_number_is_kept() -> None:
    asked: list[int] = []
    adapter = create("owlv2:tiny")
    assert batch_size.batch_size_for(adapter, "auto", asked.append) == 1 and asked == []
    assert batch_size.batch_size_for(adapter, 7, asked.append) == 7
    adapter.set_task(DetectionTask("toy", ["cat"]))
    assert run_split(adapter, split(), None, "auto", progress=False, loop=LoopOptions(1, None)).timing.batch_size == 1
