"""The answer cache: round trips, keys, a writer killed mid-write, concurrent writers, and
failures that are never stored."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.errors import DataError

from pytest_rf100vl.adapters.base import Adapter, Detections, DetectionTask, GroundingAnswer, GroundingQuery
from pytest_rf100vl.engine.answer_cache import AnswerCache, answer_from, image_digest, key_for, payload_of

BIG = 200_000  # float64 values per record in the crash test: most of a writer's time is spent writing


def noise(seed: int, size: tuple[int, int] = (40, 30)) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def record(index: int) -> dict:
    """The payload a test writer stores under key ``k<index>``: checkable from the index alone."""
    return {"index": index, "values": np.arange(BIG, dtype=np.float64) + index}


def write_forever(path: str, start: int, step: int) -> None:
    """Write records start, start + step, ... until killed."""
    with AnswerCache(path) as cache:
        index = start
        while True:
            cache.put(f"k{index}", record(index))
            index += step


def write_range(path: str, first: int, count: int, shared: int) -> None:
    """Write ``count`` own records from ``first`` and the ``shared`` records every writer writes."""
    with AnswerCache(path) as cache:
        for index in range(first, first + count):
            cache.put(f"own{index}", {"index": index, "values": np.full(1000, index, dtype=np.int64)})
            if index - first < shared:
                cache.put(f"shared{index - first}", {"index": index - first})


def spawn(target, *args) -> multiprocessing.Process:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args, daemon=True)
    process.start()
    return process


def test_answers_round_trip(tmp_path: Path) -> None:
    detections = Detections(
        np.array([[1.5, 2.25, 30.0, 40.125]]), np.array([0.123456789012345]), np.array([2], dtype=np.int64)
    )
    grounding = GroundingAnswer((1.0, 2.0, 3.0, 4.0), "top-left", {"box": "[1, 2, 3, 4] ✓", "quadrant": "top left"})
    with AnswerCache(tmp_path / "answers.sqlite") as cache:
        cache.put("d", payload_of(detections))
        cache.put("g", payload_of(grounding))
        cache.put("none", payload_of(GroundingAnswer(None, None)))
        cache.put("nan", {"score": float("nan"), "nested": [{"a": np.float32(0.5)}, None], "grid": np.eye(2, dtype=bool)})
    with AnswerCache(tmp_path / "answers.sqlite") as cache:  # a fresh process would see the same
        found = answer_from(cache.get("d"))
        assert isinstance(found, Detections)
        np.testing.assert_array_equal(found.boxes, detections.boxes)
        np.testing.assert_array_equal(found.scores, detections.scores)  # bit-exact, not rounded
        assert found.labels.dtype == np.int64 and found.labels.tolist() == [2]
        assert answer_from(cache.get("g")) == grounding
        assert answer_from(cache.get("none")) == GroundingAnswer(None, None)
        other = cache.get("nan")
        assert np.isnan(other["score"]) and other["nested"] == [{"a": 0.5}, None]
        assert other["grid"].dtype == bool and other["grid"].tolist() == [[True, False], [False, True]]
        assert cache.get("missing") is None and len(cache) == 4


class Scripted(Adapter):
    """An adapter whose prompts are given: what the cache needs of the contract."""

    name = "scripted"
    option_defaults = {"threshold": 0.1}

    def predict(self, batch):
        return [Detections.empty() for _ in batch]

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return ("uouo", query.box_prompt) if query else ("rf100vl", *self.task.classes)


def test_keys_change_with_everything_that_changes_an_answer() -> None:
    base = dict(model="m", checkpoint="c", revision="r1", options={"a": 1}, dtype="float32", prompt=["find a cat"])
    key = AnswerCache.key(**base, image=noise(0))
    assert AnswerCache.key(**base, image=noise(0)) == key  # same pixels, another object
    changed = [
        {"model": "m2"},
        {"checkpoint": "c2"},
        {"revision": "r2"},
        {"options": {"a": 2}},
        {"dtype": "bfloat16"},
        {"prompt": ["find a dog"]},
    ]
    keys = {AnswerCache.key(**{**base, **change}, image=noise(0)) for change in changed}
    keys |= {AnswerCache.key(**base, image=noise(1)), AnswerCache.key(**base, image=noise(0).convert("L"))}
    assert key not in keys and len(keys) == len(changed) + 2
    assert image_digest(b"abc") != image_digest(b"abd")

    adapter = Scripted("c", threshold="0.5")
    adapter.set_task(DetectionTask("d", ["cat", "dog"]))
    first = key_for(adapter, noise(0))
    adapter.set_task(DetectionTask("d", ["dog", "cat"]))  # same names, other label order
    assert key_for(adapter, noise(0)) != first
    query = GroundingQuery("cat", "where is the cat", "which quadrant")
    assert key_for(adapter, noise(0), query) != key_for(adapter, noise(0), GroundingQuery("cat", "where?", "q"))


def test_failures_are_never_stored(tmp_path: Path) -> None:
    with AnswerCache(tmp_path / "answers.sqlite") as cache:
        for failure in (RuntimeError("CUDA out of memory"), None, "error", Detections.empty()):
            with pytest.raises(TypeError, match="only answers are cached"):
                cache.put("k", failure)
        with pytest.raises(TypeError, match="cannot be stored"):
            cache.put("k", {"error": RuntimeError("boom")})
        with pytest.raises(TypeError, match="only answers are cached"):
            payload_of(RuntimeError("boom"))
        assert cache.get("k") is None and len(cache) == 0


def test_a_writer_killed_mid_write_leaves_every_committed_answer_and_nothing_torn(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    AnswerCache(path).close()
    writer = spawn(write_forever, str(path), 0, 1)
    with AnswerCache(path) as cache:
        deadline = time.monotonic() + 60
        while len(cache) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(writer.pid, signal.SIGKILL)  # at a random point of a write: most of the time is spent writing
        writer.join()
    assert writer.exitcode == -signal.SIGKILL
    with AnswerCache(path) as cache:
        stored = len(cache)
        assert stored >= 8
        for index in range(stored):  # committed in order: 0..stored-1, each whole
            found = cache.get(f"k{index}")
            assert found is not None and found["index"] == index
            np.testing.assert_array_equal(found["values"], record(index)["values"])
        assert cache.get(f"k{stored}") is None


def test_a_record_that_fails_its_checksum_is_not_served(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    with AnswerCache(path) as cache:
        cache.put("k", {"box": [1.0, 2.0, 3.0, 4.0]})
    with sqlite3.connect(path) as db:  # a damaged record: payload changed behind the cache's back
        db.execute("UPDATE answers SET payload = ? WHERE key = 'k'", (b'{"box": [9.0, 2.0, 3.0, 4.0]}',))
    with AnswerCache(path) as cache:
        assert cache.get("k") is None
        cache.put("k", {"box": [1.0, 2.0, 3.0, 4.0]})  # answered again, then served
        assert cache.get("k") == {"box": [1.0, 2.0, 3.0, 4.0]}


def test_two_processes_write_one_cache_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "answers.sqlite"  # neither has created it yet
    count, shared = 150, 50
    writers = [spawn(write_range, str(path), first, count, shared) for first in (0, count)]
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    with AnswerCache(path) as cache:
        assert len(cache) == 2 * count + shared
        for index in range(2 * count):
            found = cache.get(f"own{index}")
            assert found["index"] == index and found["values"].tolist() == [index] * 1000
        assert [cache.get(f"shared{i}")["index"] for i in range(shared)] == list(range(shared))


def test_a_file_that_is_not_a_cache_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(DataError, match=r"answers\.sqlite: answer cache: not a usable SQLite answer cache"):
        AnswerCache(path)


class Counting(Scripted):
    """Counts its answers, as a chat adapter counts its replies, and the images it was asked."""

    def __init__(self) -> None:
        super().__init__("stand-in")
        self.asked: list[int] = []

    def predict(self, batch):
        self.asked += [item.image_id for item in batch]
        return super().predict(batch)

    def answer_counts(self) -> dict[str, int]:
        return {"answers": len(self.asked)}


def test_duplicate_images_in_a_fresh_run_are_asked_and_timed_not_taken_for_a_resumed_cache(tmp_path: Path) -> None:
    import datasets

    from pytest_rf100vl.engine.runner import LoopOptions, Rounds, answer
    from tests.plugin.test_concurrency import png

    seeds = [0, 1, 0, 2, 1, 3]  # images 2 and 4 are byte-identical copies of 0 and 1
    images = datasets.Dataset.from_dict({
        "image": [{"bytes": png(seed), "path": None} for seed in seeds], "image_id": list(range(len(seeds))),
        "file_name": [f"{i}.png" for i in range(len(seeds))],
    }).cast_column("image", datasets.Image())
    loop = LoopOptions(0, tmp_path, Rounds(max_time=60.0, min_rounds=3, max_rounds=3))
    adapter = Counting()
    adapter.set_task(DetectionTask("d", ["cat"]))
    fresh = answer(adapter, images, None, 1, loop, "fresh")
    assert fresh.timing.cached_images == 0 and len(fresh.rounds) == 3  # the timing rounds ran
    assert fresh.answer_counts == {"answers": 6} and adapter.asked[:6] == list(range(6))
    resumed = Counting()
    resumed.set_task(DetectionTask("d", ["cat"]))
    again = answer(resumed, images, None, 1, loop, "again")  # a resumed run: every answer is cached
    assert again.timing.cached_images == 6 and len(again.rounds) == 1 and resumed.asked == []
