"""CLIP embeddings of cut-outs with a tiny random open_clip model, and the on-disk cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.uouo.compose import BACKGROUND
from rf100vl_hf.uouo.embeddings import (
    ClipEmbedder,
    EmbeddingCache,
    embed_cutouts,
    embedding_view,
    weights_key,
)
from rf100vl_hf.uouo.sources import read_source


@pytest.fixture(scope="module")
def source(iotkits: Path):
    return read_source(iotkits, progress=False)


def test_view_is_the_object_on_the_background(source) -> None:
    cutout = source.items["Arduino-Nano"][0]
    view = embedding_view(cutout)
    x0, y0, x1, y1 = cutout.alpha_box
    assert view.size == (max(x1 - x0, y1 - y0),) * 2
    pixels = np.asarray(view)
    rgba = np.asarray(Image.open(cutout.path).convert("RGBA").crop(cutout.alpha_box))
    top = (view.height - rgba.shape[0]) // 2
    left = (view.width - rgba.shape[1]) // 2
    opaque = rgba[..., 3] == 255
    assert np.array_equal(pixels[top : top + rgba.shape[0], left : left + rgba.shape[1]][opaque], rgba[..., :3][opaque])
    transparent = rgba[..., 3] == 0
    assert (pixels[top : top + rgba.shape[0], left : left + rgba.shape[1]][transparent] == BACKGROUND).all()


def test_embeddings_are_unit_norm_and_seeded(source, tiny_clip: str, tmp_path: Path) -> None:
    cutouts = source.cutouts()[:6]
    first = embed_cutouts(cutouts, ClipEmbedder(tiny_clip, None), EmbeddingCache(tmp_path / "a.sqlite"), progress=False)
    again = embed_cutouts(cutouts, ClipEmbedder(tiny_clip, None), EmbeddingCache(tmp_path / "b.sqlite"), progress=False)
    assert first.shape == (6, 64) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1, atol=1e-5)
    assert np.allclose(first, again, atol=1e-6)  # a random-init model is one fixed (seeded) model
    assert not np.allclose(first[0], first[1])


def test_cache_avoids_embedding_again(source, tiny_clip: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    encode = ClipEmbedder.encode

    def counting(self: ClipEmbedder, images: list) -> np.ndarray:
        calls.append(len(images))
        return encode(self, images)

    monkeypatch.setattr(ClipEmbedder, "encode", counting)
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    cutouts = source.cutouts()
    first = embed_cutouts(cutouts[:30], ClipEmbedder(tiny_clip, None, batch_size=16), cache, progress=False)
    assert sum(calls) == 30
    both = embed_cutouts(cutouts, ClipEmbedder(tiny_clip, None, batch_size=16), EmbeddingCache(cache.path), progress=False)
    assert sum(calls) == 50  # only the 20 new ones
    assert np.array_equal(both[:30], first)
    embed_cutouts(cutouts, ClipEmbedder(tiny_clip, None), cache, progress=False)
    assert sum(calls) == 50


def test_weights_files_are_keyed_by_content(tmp_path: Path) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"some weights")
    key = weights_key(str(weights))
    assert key.startswith("file-") and weights_key(str(weights)) == key
    weights.write_bytes(b"other weights")
    assert weights_key(str(weights)) != key
    assert weights_key("laion2b_s34b_b79k") == "laion2b_s34b_b79k" and weights_key(None) == "random-init-seed0"


def test_default_device_is_the_project_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from rf100vl_hf.uouo.embeddings import ClipEmbedder, default_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert default_device() == "mps" and ClipEmbedder(device=None).device == "mps"
    assert ClipEmbedder(device="auto").device == "mps" and ClipEmbedder(device="cpu").device == "cpu"
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        ClipEmbedder(device="cuda")
