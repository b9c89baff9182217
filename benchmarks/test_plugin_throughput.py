"""Throughput of the plugin's inference loops against the obvious hand-written loops, in the
same run: same tiny random model, same images, same batch size.

- RF100-VL: a tiny OWLv2 on sample images. The plugin's loop decodes in a prefetching
  thread and makes every output safe to score (``sanitize_detections``, failure
  isolation, timing); the hand-written loop decodes and calls ``adapter.predict`` one
  batch after the other.
- UOUO: the tiny ``clip-quadrant`` baseline on mosaics of the embedded cut-outs. The
  plugin's loop (prefetching, failure isolation, answer checks, timing) against decoding
  and calling ``adapter.ground`` one batch after the other.

Target: the plugin keeps at least 0.9x the images/s of the hand-written loop.

Run with ``pytest benchmarks/test_plugin_throughput.py -s`` to see the ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

N_IMAGES, BATCH_SIZE, ROUNDS = 32, 4, 5
MIN_RATIO = 0.9


@pytest.fixture(scope="module")
def tiny_owlv2_task(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """A tiny OWLv2 told the sample's classes, and a split of 32 sample images (own caches)."""
    root = tmp_path_factory.mktemp("throughput")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RF100VL_HF_HOME", str(root / "home"))
        from rf100vl_hf.metadata import read_metadata
        from rf100vl_hf.rf100vl.builder import load_rf100vl
        from rf100vl_hf.sample import write_sample_export

        from pytest_rf100vl.adapters import registry
        from pytest_rf100vl.kinds.rf100vl.tasks import detection_task

        write_sample_export(root / "data" / "shapes", sizes={"test": N_IMAGES})
        dataset = load_rf100vl("shapes", split="test", data_dir=root / "data", cache_dir=root / "cache", progress=False)
        adapter = registry.create("owlv2:tiny", device="cpu")
        adapter.set_task(detection_task(dataset, read_metadata(dataset), "test", "names", lambda split: dataset))
        yield adapter, dataset
        adapter.close()


def hand_written_loop(adapter: Any, dataset: Any, batch_size: int) -> int:
    """Decode a batch, predict it, repeat: what one would write without the plugin."""
    import datasets

    from rf100vl_hf.images import open_rgb

    from pytest_rf100vl.adapters.base import ImageItem

    rows = dataset.cast_column("image", datasets.Image(decode=False))
    done = 0
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        items = [
            ImageItem(open_rgb(image["bytes"]), image_id, file_name)
            for image, image_id, file_name in zip(batch["image"], batch["image_id"], batch["file_name"])
        ]
        done += len(adapter.predict(items))
    return done


def compare_loops(
    benchmark: Any, plugin_loop: Callable[[], Any], hand_written: Callable[[], int], n_images: int
) -> Any:
    """Time ``plugin_loop`` under pytest-benchmark and ``hand_written`` before each of its
    rounds (so both see the same machine load); print and check the ratio of images/s."""
    hand_written()  # warm the model up
    hand_seconds: list[float] = []

    def time_the_hand_written_loop() -> None:
        start = time.perf_counter()
        assert hand_written() == n_images
        hand_seconds.append(time.perf_counter() - start)

    result = benchmark.pedantic(plugin_loop, setup=time_the_hand_written_loop, rounds=ROUNDS, iterations=1)
    plugin_images_per_s = n_images / benchmark.stats["median"]
    hand_images_per_s = n_images / statistics.median(hand_seconds)
    ratio = plugin_images_per_s / hand_images_per_s
    benchmark.extra_info.update(
        {"images_per_s": plugin_images_per_s, "hand_written_images_per_s": hand_images_per_s, "ratio": ratio}
    )
    print(
        f"\nplugin loop {plugin_images_per_s:.2f} images/s, hand-written loop {hand_images_per_s:.2f} images/s: "
        f"{ratio:.2f}x (target >= {MIN_RATIO}x)"
    )
    assert ratio >= MIN_RATIO
    return result


def test_plugin_loop_against_a_hand_written_loop(benchmark: Any, tiny_owlv2_task: tuple[Any, Any]) -> None:
    from pytest_rf100vl.engine.runner import run_split

    adapter, dataset = tiny_owlv2_task
    result = compare_loops(
        benchmark,
        lambda: run_split(adapter, dataset, None, BATCH_SIZE, progress=False),
        lambda: hand_written_loop(adapter, dataset, BATCH_SIZE),
        N_IMAGES,
    )
    assert result.n_images == N_IMAGES and result.counts.failed_images == 0


@pytest.fixture(scope="module")
def tiny_clip_quadrant_task(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, list[Any]]]:
    """The tiny clip-quadrant baseline, 32 random mosaics of the embedded cut-outs (ranked by
    the same tiny CLIP, own caches) and their questions."""
    root = tmp_path_factory.mktemp("grounding-throughput")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RF100VL_HF_HOME", str(root / "home"))
        from rf100vl_hf.uouo.builder import load_uouo

        from pytest_rf100vl.adapters import registry
        from pytest_rf100vl.adapters.clip_quadrant import register_tiny
        from pytest_rf100vl.kinds.uouo.tasks import grounding_queries

        adapter = registry.create("clip-quadrant:tiny", device="cpu")
        dataset = load_uouo(
            "random", cache_dir=root / "cache", clip_model=register_tiny(), clip_pretrained=None, device="cpu",
            progress=False, num_mosaics=N_IMAGES,
        )
        yield adapter, dataset, grounding_queries(dataset)
        adapter.close()


def hand_written_grounding_loop(adapter: Any, dataset: Any, queries: list[Any], batch_size: int) -> int:
    """Decode a batch of mosaics, ask it its questions, repeat."""
    import datasets

    from rf100vl_hf.images import open_rgb

    from pytest_rf100vl.adapters.base import ImageItem

    rows = dataset.cast_column("image", datasets.Image(decode=False))
    done = 0
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        items = [
            ImageItem(open_rgb(image["bytes"]), int(mosaic_id), "")
            for image, mosaic_id in zip(batch["image"], batch["mosaic_id"])
        ]
        done += len(adapter.ground(items, queries[start : start + batch_size]))
    return done


def test_grounding_loop_against_a_hand_written_loop(
    benchmark: Any, tiny_clip_quadrant_task: tuple[Any, Any, list[Any]]
) -> None:
    from pytest_rf100vl.engine.runner import run_split

    adapter, dataset, queries = tiny_clip_quadrant_task
    result = compare_loops(
        benchmark,
        lambda: run_split(adapter, dataset, queries, BATCH_SIZE, progress=False, columns=("mosaic_id", None)),
        lambda: hand_written_grounding_loop(adapter, dataset, queries, BATCH_SIZE),
        N_IMAGES,
    )
    assert len(result.grounding) == N_IMAGES and result.counts.failed_images == 0
