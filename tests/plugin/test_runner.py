"""The inference loop's feeding and clock: decoding by a pool of threads ahead of the model, in
order, and warm-up batches timed apart from the steady-state throughput."""

from __future__ import annotations

import math
import threading
import time

import pytest

from pytest_rf100vl.engine.runner import Timing, _timed, decoded_ahead


def test_decoding_runs_ahead_in_several_threads_and_keeps_order() -> None:
    started = [threading.Event() for _ in range(6)]
    both = threading.Barrier(2, timeout=10)

    def decode(index: int) -> int:
        started[index].set()
        if index < 2:
            both.wait()  # items 0 and 1 decode at the same time, or this times out
        time.sleep(0.01 * (5 - index))  # later items finish first
        return index

    seen = []
    for index in decoded_ahead(range(6), decode, workers=2):
        if index + 1 < len(started):
            assert started[index + 1].wait(timeout=10)  # the next one is under way meanwhile
        seen.append(index)
    assert seen == [0, 1, 2, 3, 4, 5]


def test_an_error_while_decoding_reaches_the_consumer_after_the_items_before_it() -> None:
    def decode(index: int) -> int:
        if index == 1:
            raise OSError("disk gone")
        return index

    seen = []
    with pytest.raises(OSError, match="disk gone"):
        for item in decoded_ahead(range(5), decode, workers=2):
            seen.append(item)
    assert seen == [0]


def _loop(calls: list[float], warmup: int, sizes: list[int] | None = None) -> Timing:
    """``_timed`` over batches whose model call sleeps ``calls[i]`` seconds; ``sizes[i]`` of the
    batch's two images go to the model (the rest count as cached)."""
    sizes = sizes or [2] * len(calls)
    batches = [[index] * 2 for index in range(len(calls))]

    def step(items: list[int]) -> int:
        index = items[0]
        if sizes[index]:
            time.sleep(calls[index])
        return sizes[index]

    return _timed(batches, 2 * len(calls), step, "cpu", False, None, warmup)  # type: ignore[arg-type]


def test_warmup_batches_are_timed_apart_from_the_steady_state() -> None:
    timing = _loop([0.3, 0.2, 0.02, 0.02, 0.02, 0.02], warmup=2)
    assert timing.warmup_batches == 2 and 0.5 <= timing.warmup_seconds < 0.6
    assert timing.n_images == 12
    # steady state: 8 images in about 0.08 s, not 12 in 0.58 s
    assert 60 < timing.images_per_s < 8 / 0.08 * 1.05
    latency = timing.latency_ms()
    assert 20 <= latency["latency_batch_p50_ms"] <= latency["latency_batch_p95_ms"] < 100


def test_at_least_one_steady_batch_and_cached_images_are_not_throughput() -> None:
    one = _loop([0.01], warmup=2)
    assert (one.warmup_batches, one.warmup_seconds) == (0, 0.0) and one.images_per_s > 0
    two = _loop([0.2, 0.01], warmup=2)
    assert two.warmup_batches == 1 and two.warmup_seconds >= 0.2
    cached = _loop([0.01, 0.01, 0.01, 0.01], warmup=1, sizes=[0, 2, 1, 0])
    assert (cached.n_images, cached.cached_images, cached.batch_sizes) == (8, 5, [2, 1])
    assert cached.warmup_batches == 1
    everything_cached = _loop([0.01, 0.01], warmup=1, sizes=[0, 0])
    assert everything_cached.n_images == 4 and math.isnan(everything_cached.images_per_s)
    assert everything_cached.latency_ms() == {}
