"""The inference loop for models behind a server (``Adapter.concurrency`` above 1): one call per
image from a pool of threads, answers settled as they complete, so a slow request holds back no
other; at most ``concurrency`` calls in flight; failures cost their image and are never cached;
a rerun is answered from the cache without a call; UOUO answers keep the split's order."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import datasets
import numpy as np
from PIL import Image

from pytest_rf100vl.adapters.base import Adapter, Detections, DetectionTask, GroundingAnswer, GroundingQuery
from pytest_rf100vl.engine.runner import LoopOptions, run_split

N = 12
SLOW = 0  # the image whose call takes long: it ends only when every other call has ended
FAST_S = 0.05
WAIT_S = 10.0
"""How long the slow call waits for the others: reached only when they queue behind it."""


def png(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (20 + seed, 30, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def split(id_column: str = "image_id") -> datasets.Dataset:
    rows = {"image": [{"bytes": png(i), "path": None} for i in range(N)], id_column: list(range(N)),
            "file_name": [f"{i}.png" for i in range(N)]}
    return datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image())


class Served(Adapter):
    """Answers image ``i`` with one box ``[i, i, i + 5, i + 5]`` after a delay, like a server;
    image 3 fails. Records how many calls are in flight at once and which images it was asked;
    the call for the slow image waits until the calls for all other images have ended (or
    ``WAIT_S``), and records whether they did and how long it took."""

    name = "served"

    def __init__(self, concurrency: int, fail: int | None = 3):
        super().__init__("stand-in")
        self.concurrency = concurrency
        self.fail = fail
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self.asked: list[int] = []
        self.got_bytes: list[bool] = []
        self.others_ended = threading.Event()
        self.ended_others = 0
        self.others_ended_first = False
        self.slow_seconds = 0.0

    def call(self, image_id: int) -> None:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.asked.append(image_id)
        if image_id == SLOW:
            began = time.perf_counter()
            self.others_ended_first = self.others_ended.wait(WAIT_S)
            self.slow_seconds = time.perf_counter() - began
        else:
            time.sleep(FAST_S)
        with self.lock:
            self.in_flight -= 1
            if image_id != SLOW:
                self.ended_others += 1
                if self.ended_others == N - 1:
                    self.others_ended.set()
        if image_id == self.fail:
            raise ConnectionError("the server went away")

    def predict(self, batch):
        answers = []
        for item in batch:
            self.call(item.image_id)
            self.got_bytes.append(item.data is not None and item.data[:4] == b"\x89PNG")
            i = float(item.image_id)
            answers.append(Detections(np.array([[i, i, i + 5, i + 5]]), np.ones(1), np.zeros(1, dtype=np.int64)))
        return answers

    def ground(self, batch, queries):
        for item in batch:
            self.call(item.image_id)
        return [GroundingAnswer((0.0, 0.0, 1.0, 1.0), query.target) for query in queries]

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return ("served", query.target if query else "detect")


def detect(adapter: Served, cache: Path | None = None):
    adapter.set_task(DetectionTask("served", ["thing"]))
    return run_split(adapter, split(), None, batch_size=4, progress=False, loop=LoopOptions(0, cache))


def test_concurrent_calls_return_every_answer_with_no_head_of_line_blocking() -> None:
    adapter = Served(concurrency=4)
    result = detect(adapter)
    assert sorted(adapter.asked) == list(range(N)) and adapter.most_in_flight == 4
    assert all(adapter.got_bytes)  # the original file bytes travel with each image
    for image_id in range(N):
        boxes = result.detections[image_id].boxes
        expected = np.zeros((0, 4)) if image_id == 3 else np.array([[image_id, image_id, image_id + 5, image_id + 5]])
        np.testing.assert_array_equal(boxes, expected)
    assert result.counts.failed_images == 1 and "the server went away" in result.counts.first_error
    # Free of head-of-line blocking, the other 11 calls run and end beside the slow one. Serially,
    # or batched by 4 with a wait for the slowest of each batch, they would wait for it to end.
    assert adapter.others_ended_first, "calls queued behind the slow one"
    assert result.timing.n_images == N and len(result.timing.batch_seconds) == N
    assert max(result.timing.batch_seconds) >= adapter.slow_seconds  # each call timed from its own start


def test_a_rerun_is_answered_from_the_cache_except_the_failed_image(tmp_path: Path) -> None:
    first = Served(concurrency=3)
    detect(first, tmp_path)
    second = Served(concurrency=3, fail=None)
    result = detect(second, tmp_path)
    assert second.asked == [3]  # the failure was never stored; every answer was
    assert result.counts.failed_images == 0 and result.timing.cached_images == N - 1
    np.testing.assert_array_equal(result.detections[3].boxes, [[3, 3, 8, 8]])


def test_grounding_answers_keep_the_split_order_whatever_order_they_complete_in() -> None:
    adapter = Served(concurrency=4, fail=5)
    queries = [GroundingQuery(f"object {i}", "where?", "which quadrant?") for i in range(N)]
    result = run_split(adapter, split("mosaic_id"), queries, progress=False, loop=LoopOptions(0, None),
                       columns=("mosaic_id", None))
    assert [answer.quadrant for answer in result.grounding] == [
        None if i == 5 else f"object {i}" for i in range(N)
    ]
    assert list(result.errors) == [5] and "ConnectionError" in result.errors[5]
