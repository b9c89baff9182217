"""A model behind a server, through the ``openai`` adapter and the plugin's loop, against the
stand-in OpenAI server answering every request after a fixed 200 ms (as a loaded server or an
API would), in the same run, alternating rounds:

- images/s at ``concurrency=8`` against ``concurrency=1``: target at least 6x (8x is the
  ceiling; what is left goes to the HTTP client, base64 and the server's thread);
- what the plugin adds per request: its loop at ``concurrency=1`` against a hand-written loop
  that sends the same requests with the same ``openai`` client one after another (the
  authors' scripts do this); target under 5 ms per request.

Run with ``pytest benchmarks/test_served_concurrency.py -s`` to see the figures.
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.support.model_servers import serve_openai

DELAY_S = 0.2
IMAGES = 24
ROUNDS = 3
MIN_SPEED_UP = 6.0
MAX_OVERHEAD_MS = 5.0


def jpeg(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def split() -> Any:
    import datasets

    rows = {"image": [{"bytes": jpeg(i), "path": None} for i in range(IMAGES)], "image_id": list(range(IMAGES)),
            "file_name": [f"{i}.jpg" for i in range(IMAGES)]}
    return datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image())


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    answer = '[{"bbox_2d": [100, 100, 300, 300], "label": "thing"}]'
    with serve_openai(answer=lambda received: answer, delay=DELAY_S) as running:
        yield running


def plugin_round(server: Any, split: Any, concurrency: int) -> float:
    """Images/s of the plugin's loop over the split (answer cache off)."""
    from pytest_rf100vl.adapters.base import DetectionTask
    from pytest_rf100vl.adapters.registry import create
    from pytest_rf100vl.engine.runner import LoopOptions, run_split

    adapter = create("openai:qwen2.5-vl-72b-instruct", base_url=server.url, concurrency=concurrency)
    adapter.set_task(DetectionTask("bench", ["thing"]))
    began = time.perf_counter()
    result = run_split(adapter, split, None, progress=False, loop=LoopOptions(0, None))
    seconds = time.perf_counter() - began
    assert result.counts.failed_images == 0 and sum(len(d.boxes) for d in result.detections.values()) == IMAGES
    adapter.close()
    return IMAGES / seconds


def hand_written_round(server: Any, bodies: list[dict[str, Any]]) -> float:
    """Images/s of the same requests sent one after another with the ``openai`` client."""
    from openai import OpenAI

    client = OpenAI(base_url=server.url, api_key="none", max_retries=0)
    began = time.perf_counter()
    for body in bodies:
        client.chat.completions.create(**body)
    return len(bodies) / (time.perf_counter() - began)


def test_concurrent_requests_and_what_the_plugin_adds(server: Any, split: Any) -> None:
    serial, concurrent, hand = [], [], []
    for _ in range(ROUNDS):  # alternate, so every side sees the same machine load
        before = len(server.received)
        serial.append(plugin_round(server, split, 1))
        bodies = [{key: received.json[key] for key in ("model", "messages", "temperature", "max_tokens")
                   if key in received.json} for received in server.received[before:]]
        hand.append(hand_written_round(server, bodies))
        concurrent.append(plugin_round(server, split, 8))
    speed_up = statistics.median(concurrent) / statistics.median(serial)
    overhead_ms = (1 / statistics.median(serial) - 1 / statistics.median(hand)) * 1000
    print(
        f"\nserved model at {DELAY_S * 1000:.0f} ms a request, {IMAGES} images, medians of {ROUNDS} rounds: "
        f"concurrency 8 {statistics.median(concurrent):.1f} images/s, concurrency 1 "
        f"{statistics.median(serial):.2f} images/s: {speed_up:.2f}x (target >= {MIN_SPEED_UP}x); hand-written "
        f"loop {statistics.median(hand):.2f} images/s: the plugin adds {overhead_ms:.2f} ms a request "
        f"(target < {MAX_OVERHEAD_MS} ms)"
    )
    assert speed_up >= MIN_SPEED_UP
    assert overhead_ms < MAX_OVERHEAD_MS
