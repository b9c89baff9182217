"""CLIP embeddings of cut-outs with a tiny random open_clip model, and the on-disk cache."""

from __future__ import annotations

import time
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


DEFAULT_WEIGHTS = ("ViT-B-32", "laion2b_s34b_b79k")
"""open_clip's default model and tag here: downloaded from the Hub repository their config names."""


def test_weights_the_hub_cannot_give_fail_within_seconds_naming_the_remedies(hub_server) -> None:
    from rf100vl_hf.uouo.embeddings import ClipWeightsError

    embedder = ClipEmbedder(*DEFAULT_WEIGHTS, device="cpu")
    started = time.perf_counter()
    with hub_server.down(), pytest.raises(ClipWeightsError) as caught:
        embedder.encode([Image.new("RGB", (8, 8))])
    assert time.perf_counter() - started < 5  # huggingface_hub alone retries for about a minute
    message = str(caught.value)
    assert "\n" not in message and "cannot reach http://127.0.0.1" in message
    assert "clip_pretrained=None (seeded random weights" in message and "clip_pretrained=FILE" in message
    assert caught.value.advice("--x none", "--x FILE").endswith("use --x none (seeded random weights: a smoke run, "
                                                               "scores mean nothing) or --x FILE (a local copy of "
                                                               "the weights file)")


def test_offline_mode_fails_at_once_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from rf100vl_hf.uouo.embeddings import ClipWeightsError, require_weights

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ClipWeightsError, match=r"'laion2b_s34b_b79k' of ViT-B-32 \(laion/.*\): HF_HUB_OFFLINE is set"):
        require_weights(*DEFAULT_WEIGHTS)


@pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's upload of bytes
def test_cached_weights_need_no_network(hub_server, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import HfApi, hf_hub_download

    from rf100vl_hf.uouo.embeddings import hub_weights, require_weights

    repo, filename = hub_weights(*DEFAULT_WEIGHTS)
    monkeypatch.setattr(hub_server, "orgs", [*hub_server.orgs, repo.split("/")[0]])  # the stand-in token may write
    api = HfApi()
    api.create_repo(repo, token=hub_server.token, exist_ok=True)
    api.upload_file(path_or_fileobj=b"weights", path_in_repo=filename, repo_id=repo, token=hub_server.token)
    hf_hub_download(repo, filename)
    with hub_server.down():
        require_weights(*DEFAULT_WEIGHTS)  # no probe, no error
    assert hub_weights(DEFAULT_WEIGHTS[0], None) is None and hub_weights("hf-hub:org/clip", None) == (
        "org/clip", "open_clip_config.json")
