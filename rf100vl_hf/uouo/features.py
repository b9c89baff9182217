"""The curation's CLIP features per image, as the UOUO paper's §3 defines them.

For a category ``c`` of ``n`` images with unit-norm image embeddings ``E_1..E_n`` and the
unit-norm text embedding ``T_c`` of its name (``docs/uouo.md``, "Curation"):

- ``avg_similarity``: ``a_i = (sum_j G_ij - G_ii) / (n - 1)``, the mean of row ``i`` of the
  Gram matrix ``G_ij = cos(E_i, E_j)`` over the *other* images; computed as
  ``(E_i . sum_j E_j - E_i . E_i) / (n - 1)``, which is the same number without the ``n x n``
  matrix (a category of 10,000 images costs ``n d``, not ``n^2``);
- ``text_similarity``: ``cos(E_i, T_c)``;
- ``percentile``: the percentile rank of ``a_i`` among the category's ``a``, in 0..100:
  ``100 * (#{a_j < a_i} + #{a_j <= a_i}) / (2 n)`` (ties count half, as SciPy's
  ``percentileofscore(kind="mean")``);
- ``category_mean`` and ``category_variance``: the mean and the (population) variance of the
  category's ``a``.

What the classifier sees is these five numbers; ``E_i`` and ``T_c`` enter through them. The
raw images are embedded whole (open_clip's own resize and centre crop), through the same
SQLite cache as the cut-outs (:mod:`rf100vl_hf.uouo.embeddings`), under their own view key.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rf100vl_hf.uouo.embeddings import ClipEmbedder, EmbeddingCache, embed_views
from rf100vl_hf.uouo.rawimages import RawImage, decode_rgb

FEATURES: tuple[str, ...] = ("avg_similarity", "text_similarity", "percentile", "category_mean", "category_variance")
RAW_VIEW_VERSION = "raw-rgb-1"
"""The view of a raw image CLIP embeds (the whole image in RGB, longest side at most :data:`VIEW_SIDE`)."""
VIEW_SIDE = 1024


def category_features(embeddings: np.ndarray, text: np.ndarray) -> np.ndarray:
    """The ``(n, 5)`` features of one category's unit-norm embeddings ``(n, d)`` and its name's
    unit-norm text embedding ``(d,)``, columns in :data:`FEATURES` order; ``n`` must be at least 2."""
    count = len(embeddings)
    if count < 2:
        raise ValueError(f"a category needs at least 2 images for an average similarity, got {count}")
    vectors = embeddings.astype(np.float64)
    self_similarity = np.einsum("ij,ij->i", vectors, vectors)
    average = (vectors @ vectors.sum(axis=0) - self_similarity) / (count - 1)
    ordered = np.sort(average)
    below, at_or_below = np.searchsorted(ordered, average, "left"), np.searchsorted(ordered, average, "right")
    percentile = 100.0 * (below + at_or_below) / (2 * count)
    columns = [average, vectors @ text.astype(np.float64), percentile,
               np.full(count, average.mean()), np.full(count, average.var())]
    return np.stack(columns, axis=1)


def raw_model_key(model_name: str) -> str:
    """The cache's model field for raw images (never equal to a cut-out's)."""
    return f"{model_name}|{RAW_VIEW_VERSION}"


def embed_raw(images: Sequence[RawImage], embedder: ClipEmbedder, cache: EmbeddingCache | None = None,
              progress: bool = True) -> np.ndarray:
    """Unit-norm embeddings of raw images, ``(len(images), dim)``, batched, cached and resumable."""
    return embed_views(images, lambda image: image.digest, lambda image: decode_rgb(image, VIEW_SIDE), embedder,
                       raw_model_key(embedder.model_name), cache, progress, "embedding raw images")


def collection_features(
    categories: dict[str, list[RawImage]], embedder: ClipEmbedder, cache: EmbeddingCache | None = None,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Each category's ``(n, 5)`` features (categories of at least 2 images)."""
    names = sorted(categories)
    images = [image for name in names for image in categories[name]]
    vectors = embed_raw(images, embedder, cache, progress)
    texts = embedder.encode_text(names) if names else np.zeros((0, 0), dtype=np.float32)
    features: dict[str, np.ndarray] = {}
    start = 0
    for name, text in zip(names, texts):
        count = len(categories[name])
        features[name] = category_features(vectors[start : start + count], text)
        start += count
    return features
