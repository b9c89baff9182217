"""The prefetching that lets decoding overlap inference."""

from __future__ import annotations

import threading

import pytest

from pytest_rf100vl.run.runner import prefetched


def test_prefetching_runs_ahead_of_the_consumer_and_keeps_order() -> None:
    produced = [threading.Event() for _ in range(4)]

    def producer():
        for index, event in enumerate(produced):
            event.set()
            yield index

    seen = []
    for index in prefetched(producer(), depth=2):
        if index + 1 < len(produced):
            # The next item is made while this one is being consumed.
            assert produced[index + 1].wait(timeout=10)
        seen.append(index)
    assert seen == [0, 1, 2, 3]


def test_an_error_while_producing_reaches_the_consumer_after_the_items_before_it() -> None:
    def producer():
        yield 1
        raise OSError("disk gone")

    seen = []
    with pytest.raises(OSError, match="disk gone"):
        for item in prefetched(producer()):
            seen.append(item)
    assert seen == [1]
