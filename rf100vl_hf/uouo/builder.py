"""The ``uouo`` datasets builder: configs ``random`` and ``mmd``, one ``test`` split.

A builder is made from a cut-out source (:mod:`.sources`) and a CLIP embedder
(:mod:`.embeddings`). It writes the Arrow cache under
``<HF_DATASETS_CACHE>/uouo/<config>/<version>/<hash>``; the hash covers the source
fingerprint and the CLIP model and weights (the inputs), the config id covers the
parameters (``num_mosaics``, ``seed``, ``sigma``, ``route``), and it is the bare config
name when they are the defaults. So after one build, ``load_dataset("uouo", "mmd",
split="test")`` finds the cache from any directory, offline, through datasets' cache
fallback (the most recently built source wins when there are several).

Building embeds every cut-out (once: embeddings are cached on disk), finds each
category's nearest categories by MMD (:mod:`.mmd`), then draws and composes the mosaics
(:mod:`.plan`, :mod:`.compose`). The ``random`` config embeds too, because its mosaics
record the MMD^2 of their categories to the anchor, for comparison with ``mmd``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import datasets
import numpy as np
import xxhash

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.metadata import to_description
from rf100vl_hf.uouo import compose as composer
from rf100vl_hf.uouo.embeddings import (
    DEFAULT_MODEL,
    DEFAULT_PRETRAINED,
    VIEW_VERSION,
    ClipEmbedder,
    EmbeddingCache,
    embed_cutouts,
)
from rf100vl_hf.uouo.mmd import DEFAULT_SIGMA, CategoryNeighbours, resolve_route
from rf100vl_hf.uouo.plan import MODES, mosaic_rng, plan_mosaic
from rf100vl_hf.uouo.prompts import BOX_PROMPT, QUADRANT_PROMPT, QUADRANTS, box_prompt, quadrant_prompt
from rf100vl_hf.uouo.sample import ensure_sample_source
from rf100vl_hf.uouo.sources import MIN_IMAGES, CutoutSource, read_alpha, read_source

BUILDER_NAME = "uouo"
FORMAT_VERSION = "2"
"""Bumped whenever composition or features change, so an old cache is not reused."""
VERSION = datasets.Version("1.0.0")
DEFAULT_NUM_MOSAICS = 200
"""Enough for a standard error of about 3.5 points on quadrant accuracy; raise it for a large source."""

CITATION = """@inproceedings{pi-etal-2024-uouo,
  title={{UOUO}: Uncontextualized Uncommon Objects for Measuring Knowledge Horizons of Vision Language Models},
  author={Pi, Xinyu and Wu, Mingyuan and Jiang, Jize and Zheng, Haozhen and Tian, Beitong and Zhai, ChengXiang and Nahrstedt, Klara and Hu, Zhiting},
  booktitle={Proceedings of the 2024 Conference on Empirical Methods in Natural Language Processing},
  pages={6432--6441},
  year={2024},
  doi={10.18653/v1/2024.emnlp-main.369}
}"""
HOMEPAGE = "https://aclanthology.org/2024.emnlp-main.369"


@dataclass
class UouoConfig(datasets.BuilderConfig):
    """Parameters of the test split; the name (``random`` or ``mmd``) is how categories are chosen."""

    num_mosaics: int = DEFAULT_NUM_MOSAICS
    seed: int = 0
    sigma: float = DEFAULT_SIGMA
    route: str = "auto"  # nearest categories: "exact", "means" or "auto" (see rf100vl_hf.uouo.mmd)


PARAMETERS = ("num_mosaics", "seed", "sigma", "route")


def features() -> datasets.Features:
    box = datasets.List(datasets.Value("float64"), length=4)
    return datasets.Features(
        {
            "image": datasets.Image(),
            "mosaic_id": datasets.Value("int32"),
            "objects": {
                "category": datasets.List(datasets.Value("string")),
                "box": datasets.List(box),  # xyxy canvas pixels, tight around the pasted alpha
                "box_norm": datasets.List(box),  # box / canvas size
                "quadrant": datasets.List(datasets.Value("string")),
                "source_id": datasets.List(datasets.Value("string")),
                "source_box": datasets.List(datasets.List(datasets.Value("int32"), length=4)),  # alpha box in the source
                "scale": datasets.List(datasets.Value("float64")),
                "flip": datasets.List(datasets.Value("bool")),
                "offset": datasets.List(datasets.List(datasets.Value("int32"), length=2)),
                "size": datasets.List(datasets.List(datasets.Value("int32"), length=2)),
                "mmd2_to_anchor": datasets.List(datasets.Value("float64")),  # 0.0 for the anchor (the target)
            },
            "target_index": datasets.Value("int32"),
            "target_category": datasets.Value("string"),
            "target_quadrant": datasets.Value("string"),
            "target_box": box,
            "target_box_norm": box,
            "box_prompt": datasets.Value("string"),
            "quadrant_prompt": datasets.Value("string"),
        }
    )


class Uouo(datasets.GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = UouoConfig
    VERSION = VERSION
    BUILDER_CONFIGS = [UouoConfig(name=mode, version=VERSION) for mode in MODES]

    def __init__(
        self,
        source: CutoutSource,
        embedder: ClipEmbedder | None = None,
        embedding_cache: EmbeddingCache | None = None,
        progress: bool = True,
        **kwargs: Any,
    ):
        self.source = source
        self.embedder = embedder or ClipEmbedder()
        self.embedding_cache = embedding_cache
        self.progress = progress
        self._neighbours: CategoryNeighbours | None = None
        digest = xxhash.xxh3_64(
            f"{FORMAT_VERSION}:{source.fingerprint}:{self.embedder.model_name}:{self.embedder.weights}:{VIEW_VERSION}".encode()
        )
        kwargs.setdefault("dataset_name", BUILDER_NAME)
        kwargs.setdefault("hash", digest.hexdigest())
        super().__init__(**kwargs)

    @property
    def neighbours(self) -> CategoryNeighbours:
        """Embeddings and nearest categories, computed on first use (a prepared cache never needs them)."""
        if self._neighbours is None:
            config: UouoConfig = self.config
            cutouts = self.source.cutouts()
            vectors = embed_cutouts(cutouts, self.embedder, self.embedding_cache, progress=self.progress)
            index = {name: i for i, name in enumerate(self.source.categories)}
            labels = np.array([index[c.category] for c in cutouts])
            self._neighbours = CategoryNeighbours(
                vectors, labels, len(index), sigma=config.sigma, route=config.route,
                device=self.embedder.device, progress=self.progress,
            )
        return self._neighbours

    @property
    def metadata(self) -> dict[str, Any]:
        config: UouoConfig = self.config
        source = self.source
        return {
            "benchmark": "uouo",
            "config": config.name,
            "source": {"name": source.name, "fingerprint": source.fingerprint, "images": len(source.cutouts())},
            "categories": source.categories,
            "clip": {"model": self.embedder.model_name, "pretrained": self.embedder.pretrained,
                     "weights": self.embedder.weights, "view": VIEW_VERSION},
            "mmd": {"sigma": config.sigma, "estimator": "biased (V-statistic), Gaussian RBF kernel",
                    "route": resolve_route(config.route, len(source.categories))},
            "seed": config.seed,
            "num_mosaics": config.num_mosaics,
            "canvas": composer.CANVAS,
            "background": list(composer.BACKGROUND),
            "scale_range": list(composer.SCALE_RANGE),
            "flip_probability": composer.FLIP_PROBABILITY,
            "quadrants": list(QUADRANTS),
            "prompts": {"box": BOX_PROMPT, "quadrant": QUADRANT_PROMPT},
            "format_version": FORMAT_VERSION,
        }

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=to_description(self.metadata),
            features=features(),
            homepage=HOMEPAGE,
            citation=CITATION,
        )

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        config: UouoConfig = self.config
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"count": config.num_mosaics})]

    def _generate_examples(self, count: int) -> Iterator[tuple[int, dict[str, Any]]]:
        config: UouoConfig = self.config
        neighbours = self.neighbours
        categories = self.source.categories
        sizes = [len(self.source.items[name]) for name in categories]
        for index in range(count):
            yield index, mosaic_example(self.source, config, neighbours, sizes, index)


def mosaic_example(
    source: CutoutSource, config: UouoConfig, neighbours: CategoryNeighbours, sizes: list[int], index: int
) -> dict[str, Any]:
    """Mosaic ``index`` of a config, as a row of :func:`features`."""
    rng = mosaic_rng(config.seed, index)
    plan = plan_mosaic(config.name, rng, sizes, neighbours)
    names = [source.categories[c] for c in plan.categories]
    cutouts = [source.items[name][item] for name, item in zip(names, plan.items)]
    crops = [read_alpha(c.path, c.mask_path)[0].crop(c.alpha_box) for c in cutouts]
    mosaic = composer.compose(crops, rng)
    target = plan.target
    return {
        "image": {"bytes": composer.encode_png(mosaic.image), "path": f"mosaic_{index:06d}.png"},
        "mosaic_id": index,
        "objects": {
            "category": names,
            "box": [list(map(float, b)) for b in mosaic.boxes],
            "box_norm": mosaic.boxes_norm,
            "quadrant": list(QUADRANTS),
            "source_id": [c.source_id for c in cutouts],
            "source_box": [list(c.alpha_box) for c in cutouts],
            "scale": [p.scale for p in mosaic.placements],
            "flip": [p.flip for p in mosaic.placements],
            "offset": [list(p.offset) for p in mosaic.placements],
            "size": [list(p.size) for p in mosaic.placements],
            "mmd2_to_anchor": plan.mmd2_to_target,
        },
        "target_index": target,
        "target_category": names[target],
        "target_quadrant": QUADRANTS[target],
        "target_box": list(map(float, mosaic.boxes[target])),
        "target_box_norm": mosaic.boxes_norm[target],
        "box_prompt": box_prompt(names[target]),
        "quadrant_prompt": quadrant_prompt(names[target]),
    }


def locate_source(source_dir: str | Path | None = None) -> Path:
    """``source_dir``, else ``$UOUO_SOURCE_DIR``, else ``<cache home>/uouo-source`` if it exists,
    else the embedded sample (:mod:`.sample`)."""
    if source_dir is not None:
        return Path(source_dir)
    if os.environ.get(paths.UOUO_SOURCE_ENV):
        root = paths.default_uouo_source_dir()
        if not root.is_dir():
            raise DatasetNotFoundError(f"${paths.UOUO_SOURCE_ENV} points at {root}, which is not a folder")
        return root
    root = paths.default_uouo_source_dir()
    return root if root.is_dir() else ensure_sample_source()


def uouo_builder(
    config: str = "mmd",
    source_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    clip_model: str = DEFAULT_MODEL,
    clip_pretrained: str | None = DEFAULT_PRETRAINED,
    device: str | None = None,
    min_images: int = MIN_IMAGES,
    progress: bool = True,
    **parameters: Any,
) -> Uouo:
    """A builder of ``config`` over the cut-outs of ``source_dir`` (see :func:`locate_source`).

    ``parameters`` set :class:`UouoConfig` fields (``num_mosaics``, ``seed``, ``sigma``,
    ``route``); only values that differ from the defaults reach the config id, so an
    explicit default still builds what the bare ``load_dataset("uouo", config)`` finds.
    """
    unknown = sorted(set(parameters) - set(PARAMETERS))
    if unknown:
        raise TypeError(f"unknown UOUO parameters {unknown}; known: {', '.join(PARAMETERS)}")
    defaults = UouoConfig()
    changed = {k: v for k, v in parameters.items() if v is not None and v != getattr(defaults, k)}
    if changed.get("num_mosaics", 1) < 1 or changed.get("sigma", 1) <= 0:
        raise ValueError(f"num_mosaics must be at least 1 and sigma positive, got {changed}")
    source = read_source(locate_source(source_dir), min_images=min_images, progress=progress)
    embedder = ClipEmbedder(clip_model, clip_pretrained, device=device)
    return Uouo(source, embedder, config_name=config, cache_dir=str(cache_dir) if cache_dir else None,
                progress=progress, **changed)


def load_uouo(
    config: str = "mmd",
    split: str | None = "test",
    source_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    clip_model: str = DEFAULT_MODEL,
    clip_pretrained: str | None = DEFAULT_PRETRAINED,
    device: str | None = None,
    progress: bool = True,
    **parameters: Any,
) -> datasets.Dataset | datasets.DatasetDict:
    """Prepare ``config`` if its cache is missing or stale, then load it (``split=None``: all splits)."""
    builder = uouo_builder(config, source_dir, cache_dir, clip_model, clip_pretrained, device, progress=progress,
                           **parameters)
    builder.download_and_prepare()
    return builder.as_dataset(split=split)
