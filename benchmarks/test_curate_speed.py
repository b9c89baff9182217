"""Speed of the UOUO curation (``rf100vl-hf uouo curate``), stage by stage, with tiny models.

- Images per second of each stage on a generated raw collection (objects on textured
  backgrounds, ``tests/support/raw_collection.py``): reading and checking, CLIP embedding
  (the tiny open_clip model, on the default device: a GPU when there is one), the §3
  features, the classifier's grid search with 5-fold cross-validation, background removal
  (the tiny remover); printed per stage.
- Background removal with ``num_proc=2`` against ``num_proc=1``, in alternating rounds, each
  into a fresh output (median of the rounds and their ratio).
- The average similarity of a 10,000-image category as the curation computes it
  (``E_i . sum_j E_j``, ``n d``) against the Gram matrix (``n^2 d``), alternating rounds.

Run with ``pytest benchmarks/test_curate_speed.py -s`` to see the figures.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rf100vl_hf.devices import resolve_device
from rf100vl_hf.uouo import classifier
from rf100vl_hf.uouo.curate import CurateOptions, Verdict, remove_backgrounds
from rf100vl_hf.uouo.embeddings import ClipEmbedder, EmbeddingCache
from rf100vl_hf.uouo.features import category_features, collection_features
from rf100vl_hf.uouo.rawimages import read_raw
from rf100vl_hf.uouo.remover import resolve_remover

from tests.support.raw_collection import CANVAS, write_raw_collection
from tests.support.tiny_clip import CONFIG as TINY_CLIP_CONFIG
from tests.support.tiny_clip import TINY_CLIP

PER_CATEGORY = 30
ROUNDS = 3
BIG_CATEGORY, DIM = 10_000, 512


def _print(benchmark: Any, text: str, **figures: Any) -> None:
    benchmark.extra_info.update(figures)
    print(f"\n{text}")


def _alternating(first: Callable[[], Any], second: Callable[[], Any], rounds: int = ROUNDS) -> tuple[float, float]:
    """Median seconds of ``first`` and ``second``, run in alternating order round by round."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for round_ in range(rounds):
        order = (0, 1) if round_ % 2 == 0 else (1, 0)
        for which in order:
            start = time.perf_counter()
            (first, second)[which]()
            times[which].append(time.perf_counter() - start)
    return float(np.median(times[0])), float(np.median(times[1]))


def test_stages_per_second(benchmark, tmp_path, monkeypatch):
    import open_clip

    monkeypatch.setenv("U2NET_HOME", str(tmp_path / "rembg"))
    (tmp_path / "clip").mkdir()
    (tmp_path / "clip" / f"{TINY_CLIP}.json").write_text(json.dumps(TINY_CLIP_CONFIG))
    open_clip.add_model_config(tmp_path / "clip")
    files = write_raw_collection(tmp_path / "raw", per_category=PER_CATEGORY, bad_files=False)
    count = len(files.alphas)

    collection = benchmark.pedantic(lambda: read_raw(files.root, progress=False), rounds=ROUNDS, iterations=1)
    read_seconds = benchmark.stats["median"]
    device = resolve_device(None)
    embedder = ClipEmbedder(TINY_CLIP, None, device)
    embedder.encode_text(["warm-up"])
    embeddings = iter(range(100))
    timings = []
    for _ in range(ROUNDS):  # a fresh cache each round: every image is embedded
        start = time.perf_counter()
        features = collection_features(collection.images, embedder,
                                       EmbeddingCache(tmp_path / f"cache-{next(embeddings)}.sqlite"), progress=False)
        timings.append(time.perf_counter() - start)
    embed_seconds = float(np.median(timings))

    table = np.concatenate([features[name] for name in sorted(features)])
    truth = np.array([source_id not in files.outliers for source_id in sorted(files.alphas)], dtype=int)
    start = time.perf_counter()
    classifier.train(table, truth, tmp_path / "labels.csv")
    classifier_seconds = time.perf_counter() - start

    remover = resolve_remover("tiny", tmp_path / "work")
    verdicts = [Verdict(image, np.zeros(5)) for image in collection.all_images()]
    outputs = iter(range(100))

    def removal(num_proc: int) -> None:
        options = CurateOptions(num_proc=num_proc, progress=False)
        remove_backgrounds([Verdict(v.image, v.features) for v in verdicts], tmp_path / f"out-{next(outputs)}",
                           remover, options)

    removal(1)  # warm: rembg and onnxruntime imported
    removal(2)  # and the fork server started
    serial, parallel = _alternating(lambda: removal(1), lambda: removal(2))
    _print(
        benchmark,
        f"curation stages on {count} raw images ({CANVAS}x{CANVAS}), tiny models, embedding on {device}:\n"
        f"  read and check      {count / read_seconds:8.1f} images/s\n"
        f"  embed (CLIP) + §3   {count / embed_seconds:8.1f} images/s\n"
        f"  classifier          {classifier_seconds:8.2f} s for the {len(list(_grid_points()))}-point grid x 5 folds "
        f"on {count} labels\n"
        f"  remove backgrounds  {count / serial:8.1f} images/s with 1 process, {count / parallel:.1f} with 2 "
        f"({serial / parallel:.2f}x; load average {os.getloadavg()[0]:.1f})",
        read_per_second=count / read_seconds, embed_per_second=count / embed_seconds,
        classifier_seconds=classifier_seconds, remove_per_second=count / serial,
        remove_per_second_2_proc=count / parallel, removal_speedup=serial / parallel,
    )


def _grid_points() -> list[tuple[Any, ...]]:
    import itertools

    return list(itertools.product(*classifier.PARAM_GRID.values()))


def test_average_similarity_without_the_gram_matrix(benchmark):
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((BIG_CATEGORY, DIM)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    text = embeddings[0]

    def gram() -> np.ndarray:
        matrix = embeddings.astype(np.float64) @ embeddings.T.astype(np.float64)
        return (matrix.sum(axis=1) - np.diag(matrix)) / (BIG_CATEGORY - 1)

    ours = benchmark.pedantic(lambda: category_features(embeddings, text)[:, 0], rounds=ROUNDS, iterations=1)
    np.testing.assert_allclose(ours, gram(), atol=1e-9)
    fast, slow = _alternating(lambda: category_features(embeddings, text), gram)
    _print(benchmark, f"average similarity of a {BIG_CATEGORY:,}-image category ({DIM}-d): {fast * 1000:.0f} ms "
           f"against {slow * 1000:.0f} ms with the Gram matrix ({slow / fast:.1f}x)",
           features_seconds=fast, gram_seconds=slow, ratio=slow / fast)
