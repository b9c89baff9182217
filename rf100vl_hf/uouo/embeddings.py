"""CLIP image embeddings of cut-outs, cached on disk.

What CLIP sees: each cut-out cropped to its alpha box, haze cleared
(:func:`rf100vl_hf.uouo.sources.cutout_crop`), centred on a square of the mosaics' plain
background colour (:data:`rf100vl_hf.uouo.compose.BACKGROUND`) and alpha-composited there.
The object therefore looks the way it does in a mosaic, and the square keeps CLIP's centre
crop from cutting it. Embeddings are the image tower's output, L2-normalised (unit norm),
float32.

The default model is open_clip's ``ViT-B-32`` with the ``laion2b_s34b_b79k`` weights
(512-d): open weights trained on a documented data set, open_clip's reference ViT-B-32.
Any open_clip model name and pretrained tag (or weights file) can be used instead.

The cache is one SQLite file under :func:`rf100vl_hf.paths.cache_home`, keyed by the
cut-out's content hash (image and mask bytes), the view version and alpha threshold, the
model name and the weights, so a rebuild, or another source holding the same files, never embeds twice.
Randomly initialised models (``pretrained=None``) are seeded, so they too are one fixed
model and can be cached. The device is not part of the key: embeddings computed on a GPU
and on a CPU differ in their last bits, and whichever was computed first is reused.

Weights that open_clip would download from the Hub are checked first (:func:`require_weights`):
huggingface_hub retries an unreachable Hub for about a minute per file, so without network
the build ends within seconds with a :class:`ClipWeightsError` naming the remedies instead.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import numpy as np
import xxhash
from PIL import Image

from rf100vl_hf import paths
from rf100vl_hf.devices import resolve_device
from rf100vl_hf.errors import Rf100vlError, unknown
from rf100vl_hf.network import HubError, bounded
from rf100vl_hf.progress import progress_bar
from rf100vl_hf.uouo.compose import BACKGROUND
from rf100vl_hf.uouo.defaults import DEFAULT_CLIP_MODEL as DEFAULT_MODEL
from rf100vl_hf.uouo.defaults import DEFAULT_CLIP_PRETRAINED as DEFAULT_PRETRAINED
from rf100vl_hf.uouo.sources import Cutout, cutout_crop

VIEW_VERSION = "square-on-background-1"
"""Changes whenever :func:`embedding_view` changes, so old cache entries stop matching."""
RANDOM_INIT_SEED = 0
WEIGHTS_PROBE_TIMEOUT = 10.0
T = TypeVar("T")
"""Seconds to wait for the Hub when checking that weights not yet cached can be downloaded."""


class ClipWeightsError(Rf100vlError, ConnectionError):
    """The CLIP weights are not on this machine and cannot be downloaded now."""

    def __init__(self, problem: str):
        self.problem = problem
        super().__init__(self.advice("clip_pretrained=None", "clip_pretrained=FILE"))

    def advice(self, random_weights: str, weights_file: str) -> str:
        """The message, with the remedies spelled the way the caller takes them (options, arguments)."""
        return (f"{self.problem}; without network use {random_weights} (seeded random weights: a smoke run, "
                f"scores mean nothing) or {weights_file} (a local copy of the weights file)")


def hub_weights(model_name: str, pretrained: str | None) -> tuple[str, str] | None:
    """The Hub repository and file open_clip downloads for ``model_name`` and ``pretrained``;
    None when nothing comes from the Hub (random init, a weights file, a local folder, a URL)."""
    import open_clip
    from open_clip.constants import HF_CONFIG_NAME, HF_WEIGHTS_NAME

    if model_name.startswith("hf-hub:"):
        return model_name.removeprefix("hf-hub:"), HF_CONFIG_NAME
    if pretrained is None or model_name.startswith("local-dir:") or Path(pretrained).is_file():
        return None
    hub = (open_clip.get_pretrained_cfg(model_name, pretrained) or {}).get("hf_hub")
    if not hub:
        return None
    repo, filename = os.path.split(hub)  # "org/name/" (the default file) or "org/name/file"
    return repo, filename or HF_WEIGHTS_NAME


def require_weights(model_name: str, pretrained: str | None) -> None:
    """Raise :class:`ClipWeightsError` within seconds when the weights open_clip needs are not
    cached and the Hub cannot be reached (offline mode, no network, no answer)."""
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    from huggingface_hub.errors import HfHubHTTPError
    from open_clip.constants import HF_SAFE_WEIGHTS_NAME

    source = hub_weights(model_name, pretrained)
    if source is None:
        return
    repo, filename = source
    if any(isinstance(try_to_load_from_cache(repo, name), str) for name in (filename, HF_SAFE_WEIGHTS_NAME)):
        return
    weights = model_name if model_name.startswith("hf-hub:") else f"{pretrained!r} of {model_name}"
    what = f"downloading the CLIP weights {weights} ({repo}/{filename})"
    try:
        with bounded(constants.ENDPOINT, what, WEIGHTS_PROBE_TIMEOUT) as seconds:
            with suppress(HfHubHTTPError):  # the Hub answered: open_clip downloads, or says what the Hub refused
                get_hf_file_metadata(hf_hub_url(repo, filename), timeout=seconds)
    except HubError as exc:
        raise ClipWeightsError(str(exc)) from None


def embedding_view(cutout: Cutout) -> Image.Image:
    """The RGB picture CLIP embeds for a cut-out (see the module docstring)."""
    crop = cutout_crop(cutout)
    side = max(crop.size)
    square = Image.new("RGBA", (side, side), (*BACKGROUND, 255))
    square.alpha_composite(crop, ((side - crop.width) // 2, (side - crop.height) // 2))
    return square.convert("RGB")


def weights_key(pretrained: str | None) -> str:
    """What identifies the weights: the tag, a weights file's content hash, or the seeded random init."""
    if pretrained is None:
        return f"random-init-seed{RANDOM_INIT_SEED}"
    path = Path(pretrained)
    if path.is_file():
        hasher = xxhash.xxh3_128()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 24), b""):
                hasher.update(block)
        return f"file-{hasher.hexdigest()}"
    return pretrained


def default_device() -> str:
    """Where embeddings are computed when no device is given: ``auto`` (cuda, then mps, then cpu)."""
    return resolve_device("auto")


class ClipEmbedder:
    """An open_clip image tower, loaded on first use (torch and open_clip are imported then, so
    this module and the cache load without the ``models`` extra)."""

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        pretrained: str | None = DEFAULT_PRETRAINED,
        device: str | None = None,
        batch_size: int = 64,
    ):
        self.model_name = model_name
        self.pretrained = pretrained
        self.weights = weights_key(pretrained)
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self._model: Any = None
        self._preprocess: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        import open_clip
        import torch

        if not self.model_name.startswith(("hf-hub:", "local-dir:")) and self.model_name not in open_clip.list_models():
            raise unknown("open_clip model", self.model_name, open_clip.list_models())
        require_weights(self.model_name, self.pretrained)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_INIT_SEED)
            model, _, preprocess = open_clip.create_model_and_transforms(
                self.model_name, pretrained=self.pretrained, device=self.device
            )
        self._model = model.eval()
        self._preprocess = preprocess
        self._tokenizer = open_clip.get_tokenizer(self.model_name)

    def encode(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Unit-norm float32 embeddings of RGB images, shape ``(len(images), dim)``."""
        import torch

        if self._model is None:
            self._load()
        with torch.inference_mode():
            batch = torch.stack([self._preprocess(image) for image in images]).to(self.device)
            features = self._model.encode_image(batch, normalize=True)
            return features.float().cpu().numpy()

    def encode_text(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 text embeddings, shape ``(len(texts), dim)`` (the curation's category names)."""
        import torch

        if self._model is None:
            self._load()
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                tokens = self._tokenizer(list(texts[start : start + self.batch_size])).to(self.device)
                chunks.append(self._model.encode_text(tokens, normalize=True).float().cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)


class EmbeddingCache:
    """Embeddings by (content hash, model, weights) in one SQLite file, safe for several processes."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else paths.cache_home() / "uouo-embeddings.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (digest TEXT, model TEXT, weights TEXT, vector BLOB, "
                "PRIMARY KEY (digest, model, weights))"
            )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection that commits on success and is always closed."""
        db = sqlite3.connect(self.path, timeout=60)
        try:
            with db:
                yield db
        finally:
            db.close()

    def get(self, digests: Iterable[str], model: str, weights: str) -> dict[str, np.ndarray]:
        wanted = list(dict.fromkeys(digests))
        found: dict[str, np.ndarray] = {}
        with self._connect() as db:
            for start in range(0, len(wanted), 500):  # SQLite limits the number of parameters
                chunk = wanted[start : start + 500]
                rows = db.execute(
                    f"SELECT digest, vector FROM embeddings WHERE model = ? AND weights = ? AND digest IN "
                    f"({','.join('?' * len(chunk))})",
                    [model, weights, *chunk],
                )
                found.update((digest, np.frombuffer(blob, dtype=np.float32)) for digest, blob in rows)
        return found

    def put(self, vectors: dict[str, np.ndarray], model: str, weights: str) -> None:
        with self._connect() as db:
            db.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)",
                [(d, model, weights, np.asarray(v, dtype=np.float32).tobytes()) for d, v in vectors.items()],
            )


def embed_views(
    items: Sequence[T],
    digest: Callable[[T], str],
    view: Callable[[T], Image.Image],
    embedder: ClipEmbedder,
    model_key: str,
    cache: EmbeddingCache | None = None,
    progress: bool = True,
    desc: str = "embedding",
) -> np.ndarray:
    """Embeddings of ``items`` in order, ``(len(items), dim)``: each item's ``view`` embedded once per
    ``digest`` under ``model_key``; only cache misses are computed, and each batch is stored as it
    is computed, so an interrupted run resumes where it stopped."""
    cache = cache or EmbeddingCache()
    known = cache.get((digest(item) for item in items), model_key, embedder.weights)
    missing = list({digest(item): item for item in items if digest(item) not in known}.items())
    with progress_bar(total=len(missing), desc=f"{desc} with {embedder.model_name}", disable=not progress) as bar:
        for start in range(0, len(missing), embedder.batch_size):
            batch = missing[start : start + embedder.batch_size]
            vectors = embedder.encode([view(item) for _, item in batch])
            fresh = {key: vector for (key, _), vector in zip(batch, vectors)}
            cache.put(fresh, model_key, embedder.weights)
            known.update(fresh)
            bar.update(len(batch))
    return np.stack([known[digest(item)] for item in items]) if items else np.zeros((0, 0), dtype=np.float32)


def cutout_model_key(model_name: str, alpha_threshold: int) -> str:
    """The cache's model field for cut-outs: the model, the view and the alpha threshold."""
    return f"{model_name}|{VIEW_VERSION}|alpha>{alpha_threshold}"


def embed_cutouts(
    cutouts: Sequence[Cutout],
    embedder: ClipEmbedder,
    cache: EmbeddingCache | None = None,
    progress: bool = True,
) -> np.ndarray:
    """Embeddings of ``cutouts`` in order, ``(len(cutouts), dim)``; only cache misses are computed."""
    thresholds = {c.alpha_threshold for c in cutouts}
    if len(thresholds) > 1:
        raise ValueError(f"cut-outs read with different alpha thresholds {sorted(thresholds)}")
    model = cutout_model_key(embedder.model_name, thresholds.pop() if thresholds else 0)
    return embed_views(cutouts, lambda c: c.digest, embedding_view, embedder, model, cache, progress,
                       "embedding cut-outs")
