"""Throughput of the plugin's inference loop against the obvious hand-written loop, in the
same run: same tiny random OWLv2, same images, same batch size.

The plugin's loop decodes in a prefetching thread and makes every output safe to score
(``sanitize_detections``, failure isolation, timing); the hand-written loop decodes and
calls ``adapter.predict`` one batch after the other. Target: the plugin keeps at least
0.9x the images/s of the hand-written loop.

Run with ``pytest benchmarks/test_plugin_throughput.py -s`` to see the ratio.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
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
        from pytest_rf100vl.tasks import detection_task

        write_sample_export(root / "data" / "shapes", sizes={"test": N_IMAGES})
        dataset = load_rf100vl("shapes", split="test", data_dir=root / "data", cache_dir=root / "cache", progress=False)
        adapter = registry.create("owlv2:tiny", device="cpu")
        adapter.set_task(detection_task(adapter, dataset, read_metadata(dataset), "test", "names", lambda split: None))
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


def test_plugin_loop_against_a_hand_written_loop(benchmark: Any, tiny_owlv2_task: tuple[Any, Any]) -> None:
    from pytest_rf100vl.runner import run_inference

    adapter, dataset = tiny_owlv2_task
    hand_written_loop(adapter, dataset.select(range(BATCH_SIZE)), BATCH_SIZE)  # warm the model up
    hand_seconds: list[float] = []

    def time_the_hand_written_loop() -> None:
        """Runs before each round of the plugin's loop, so both see the same machine load."""
        start = time.perf_counter()
        assert hand_written_loop(adapter, dataset, BATCH_SIZE) == N_IMAGES
        hand_seconds.append(time.perf_counter() - start)

    result = benchmark.pedantic(
        run_inference, args=(adapter, dataset, BATCH_SIZE), kwargs={"progress": False},
        setup=time_the_hand_written_loop, rounds=ROUNDS, iterations=1,
    )
    assert result.n_images == N_IMAGES and result.counts.failed_images == 0
    plugin_images_per_s = N_IMAGES / benchmark.stats.stats.median
    hand_images_per_s = N_IMAGES / statistics.median(hand_seconds)
    ratio = plugin_images_per_s / hand_images_per_s
    benchmark.extra_info.update(
        {"images_per_s": plugin_images_per_s, "hand_written_images_per_s": hand_images_per_s, "ratio": ratio}
    )
    print(
        f"\nplugin loop {plugin_images_per_s:.2f} images/s, hand-written loop {hand_images_per_s:.2f} images/s: "
        f"{ratio:.2f}x (target >= {MIN_RATIO}x)"
    )
    assert ratio >= MIN_RATIO
