"""The ``uouo`` datasets builder: configs ``random`` and ``mmd``, one ``test`` split.

A builder is made from its config's parameters alone (:class:`UouoConfig`): the cut-out
source folder, the mosaics' parameters, the CLIP model, the alpha threshold, the worker
processes. So every datasets API that makes a builder can make this one:
``uouo_builder``/``load_uouo`` (this module), ``datasets.load_dataset_builder`` and
``datasets.load_dataset`` under the name ``rf100vl_hf.uouo.builder`` (registered with
datasets when this module is imported; pass the source folder as ``data_dir``), or
``Uouo(config_name="mmd", source_dir=...)``.

It writes the Arrow cache under ``<HF_DATASETS_CACHE>/uouo/<config>/<version>/<hash>``;
the hash covers the inputs (the source's fingerprint, which covers the alpha threshold,
and the CLIP model and weights), the config id covers the parameters that change the
mosaics (``num_mosaics``, ``seed``, ``sigma``, ``route``) and is the bare config name when
they are the defaults. Where the source is, how many processes build it, the device and
progress bars change neither. So after one build, ``load_dataset("uouo", "mmd",
split="test")`` finds the cache from any directory, offline, through datasets' cache
fallback (the most recently built source wins when there are several).

Building embeds every cut-out (once: embeddings are cached on disk), finds each
category's nearest categories by MMD (:mod:`.mmd`) and draws every mosaic's plan
(:mod:`.plan`) in the main process; composing and PNG-encoding the mosaics (:mod:`.compose`),
most of the work, runs in ``num_proc`` processes (datasets' own ``num_proc``: each
process writes a contiguous run of mosaics). Each mosaic's generator travels with its
plan, so a mosaic is byte-identical whatever ``num_proc``. Each process keeps the
decoded cut-outs it has used (up to :data:`CROP_CACHE_SIZE`), so a cut-out is decoded
once per process, not once per mosaic. The ``random`` config embeds too, because its
mosaics record the MMD^2 of their categories to the anchor, for comparison with ``mmd``.
"""

from __future__ import annotations

import copy
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import datasets
import numpy as np
import xxhash
from PIL import Image

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError, needs_extra
from rf100vl_hf.metadata import to_description
from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.uouo import compose as composer
from rf100vl_hf.uouo.defaults import (
    DEFAULT_ALPHA_THRESHOLD,
    DEFAULT_CLIP_MODEL,
    DEFAULT_CLIP_PRETRAINED,
    DEFAULT_NUM_MOSAICS,
    DEFAULT_ROUTE,
    DEFAULT_SEED,
    DEFAULT_SIGMA,
    MODES,
    RANDOM_INIT,
    check_route,
    resolve_route,
)
from rf100vl_hf.uouo.embeddings import VIEW_VERSION, ClipEmbedder, EmbeddingCache, embed_cutouts, weights_key
from rf100vl_hf.uouo.mmd import CategoryNeighbours
from rf100vl_hf.uouo.plan import MosaicPlan, mosaic_rng, plan_mosaic
from rf100vl_hf.uouo.prompts import BOX_PROMPT, QUADRANT_PROMPT, QUADRANTS, box_prompt, quadrant_prompt
from rf100vl_hf.uouo.sample import ensure_sample_source
from rf100vl_hf.uouo.sources import MIN_IMAGES, Cutout, CutoutSource, cutout_crop, read_source

BUILDER_NAME = "uouo"
FORMAT_VERSION = "3"
"""Bumped whenever composition or features change, so an old cache is not reused."""
VERSION = datasets.Version("1.0.0")
CROP_CACHE_SIZE = 256
"""Decoded cut-outs each building process keeps (a 320-pixel cut-out is 0.4 MB)."""

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
    """Everything a build needs; the name (``random`` or ``mmd``) is how categories are chosen.

    Content parameters (in the config id when not the default): ``num_mosaics``, ``seed``,
    ``sigma``, ``route``. Inputs (in the cache hash): the source (``source_dir``, else
    datasets' ``data_dir``, else :func:`locate_source`), ``alpha_threshold``,
    ``clip_model`` and ``clip_pretrained`` (``"none"``: seeded random weights). How to
    build (in neither): ``num_proc``, ``device``, ``min_images``, ``embedding_cache`` (the
    SQLite file; default under the cache home) and ``progress``.
    """

    num_mosaics: int = DEFAULT_NUM_MOSAICS
    seed: int = DEFAULT_SEED
    sigma: float = DEFAULT_SIGMA
    route: str = DEFAULT_ROUTE  # nearest categories: "exact", "means" or "auto" (see rf100vl_hf.uouo.mmd)
    source_dir: str | None = None
    alpha_threshold: int = DEFAULT_ALPHA_THRESHOLD
    clip_model: str = DEFAULT_CLIP_MODEL
    clip_pretrained: str = DEFAULT_CLIP_PRETRAINED
    num_proc: int = 1
    device: str | None = None
    min_images: int = MIN_IMAGES
    embedding_cache: str | None = None
    progress: bool = True

    @property
    def pretrained(self) -> str | None:
        """``clip_pretrained`` as open_clip takes it (``None`` for the seeded random init)."""
        return None if self.clip_pretrained == RANDOM_INIT else self.clip_pretrained


PARAMETERS = ("num_mosaics", "seed", "sigma", "route")
"""The config fields that change the mosaics, and so the config id."""


def check_config(config: UouoConfig) -> None:
    """``ValueError`` naming the first parameter out of range."""
    if not isinstance(config.num_mosaics, int) or config.num_mosaics < 1:
        raise ValueError(f"num_mosaics must be an integer of at least 1, got {config.num_mosaics!r}")
    if not isinstance(config.sigma, (int, float)) or not config.sigma > 0:
        raise ValueError(f"sigma must be positive, got {config.sigma!r}")
    if not isinstance(config.num_proc, int) or config.num_proc < 1:
        raise ValueError(f"num_proc must be an integer of at least 1, got {config.num_proc!r}")
    if not isinstance(config.clip_pretrained, str):
        raise ValueError(f"clip_pretrained must be a tag, a weights file or {RANDOM_INIT!r}, got {config.clip_pretrained!r}")
    check_route(config.route)


def content_config_id(config: UouoConfig) -> str:
    """The config name, with a suffix for each content parameter that is not its default."""
    defaults = UouoConfig()
    changed = {key: getattr(config, key) for key in PARAMETERS if getattr(config, key) != getattr(defaults, key)}
    return config.create_config_id({"name": config.name, **changed})


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


@dataclass(frozen=True)
class PlannedMosaic:
    """What one process needs to render mosaic ``index``: its plan and its generator as the plan left it."""

    index: int
    plan: MosaicPlan
    rng: np.random.Generator


class Uouo(datasets.GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = UouoConfig
    VERSION = VERSION
    BUILDER_CONFIGS = [UouoConfig(name=mode, version=VERSION) for mode in MODES]

    def __init__(self, **kwargs: Any):
        self.source: CutoutSource | None = None
        kwargs["dataset_name"] = BUILDER_NAME  # whatever name datasets was asked for: one cache
        kwargs.pop("data_files", None)  # datasets lists the source folder's files; the source reads them itself
        self._measured: dict[str, Any] = {}
        self._composing: tuple[float, int] | None = None  # when composing started, in how many processes
        super().__init__(**kwargs)

    def _create_builder_config(
        self, config_name: str | None = None, custom_features: Any = None, config_id: str | None = None, **config_kwargs: Any
    ) -> tuple[UouoConfig, str]:
        """The config, its id (:func:`content_config_id`, whatever id datasets proposes), and the
        hash of the inputs, set here because it needs the config and must be known before the
        cache folder is."""
        config, _ = super()._create_builder_config(config_name, custom_features, None, **config_kwargs)
        check_config(config)
        root = locate_source(config.source_dir or config.data_dir)
        self.source = read_source(root, min_images=config.min_images, progress=config.progress,
                                  alpha_threshold=config.alpha_threshold)
        weights = weights_key(config.pretrained)
        self.hash = xxhash.xxh3_64(
            f"{FORMAT_VERSION}:{self.source.fingerprint}:{config.clip_model}:{weights}:{VIEW_VERSION}".encode()
        ).hexdigest()
        return config, content_config_id(config)

    @property
    def metadata(self) -> dict[str, Any]:
        config: UouoConfig = self.config
        source = self.source
        assert source is not None
        return {
            "benchmark": "uouo",
            "config": config.name,
            "source": {"name": source.name, "fingerprint": source.fingerprint, "images": len(source.cutouts()),
                       "alpha_threshold": source.alpha_threshold, "hazy": len(source.hazy),
                       "duplicates": len(source.duplicates), "license": source.licence.as_dict()},
            "categories": source.categories,
            "clip": {"model": config.clip_model, "pretrained": config.pretrained,
                     "weights": weights_key(config.pretrained), "view": VIEW_VERSION},
            "mmd": {"sigma": config.sigma, "estimator": "biased (V-statistic), Gaussian RBF kernel",
                    "route": resolve_route(config.route, len(source.categories)), **self._measured},
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

    def neighbours(self) -> CategoryNeighbours:
        """Embed every cut-out (cached) and find each category's nearest categories."""
        config: UouoConfig = self.config
        source = self.source
        assert source is not None
        cutouts = source.cutouts()
        index = {name: i for i, name in enumerate(source.categories)}
        labels = np.array([index[c.category] for c in cutouts])
        with needs_extra("building UOUO mosaics (CLIP embeddings, MMD)"):  # CLIP and MMD run on torch
            embedder = ClipEmbedder(config.clip_model, config.pretrained, device=config.device)
            vectors = embed_cutouts(cutouts, embedder, EmbeddingCache(config.embedding_cache), progress=config.progress)
            return CategoryNeighbours(vectors, labels, len(index), sigma=config.sigma, route=config.route,
                                      device=embedder.device, progress=config.progress)

    def download_and_prepare(self, *args: Any, num_proc: int | None = None, **kwargs: Any) -> None:
        """datasets' ``download_and_prepare``; ``num_proc`` defaults to the config's. A build
        (not a cache hit) is logged when it starts composing and when it ends."""
        self._composing = (0.0, num_proc or self.config.num_proc)
        super().download_and_prepare(*args, num_proc=num_proc or self.config.num_proc, **kwargs)
        if self._composing[0]:
            seconds = time.perf_counter() - self._composing[0]
            logger.info("uouo-%s: composed %d mosaics in %.1f s (%.1f mosaics/s, %d process(es))", self.config.name,
                        self.config.num_mosaics, seconds, self.config.num_mosaics / max(seconds, 1e-9),
                        self._composing[1])
        self._composing = None

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        config: UouoConfig = self.config
        assert self.source is not None
        logger.info("uouo-%s: building %d mosaics from %s (%d categories, %d cut-outs)", config.name,
                    config.num_mosaics, self.source.name, len(self.source.categories), len(self.source.cutouts()))
        neighbours = self.neighbours()
        self._measured = {"route": neighbours.route, "agreement": neighbours.agreement}
        self.info.description = to_description(self.metadata)
        planned = plan_mosaics(self.source, config, neighbours)
        processes = self._composing[1] if self._composing else config.num_proc
        self._composing = (time.perf_counter(), processes)
        logger.info("uouo-%s: composing %d mosaics in %d process(es)", config.name, len(planned), processes)
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"planned": planned})]

    def _generate_examples(self, planned: list[PlannedMosaic]) -> Iterator[tuple[int, dict[str, Any]]]:
        for mosaic in planned:
            yield mosaic.index, render_mosaic(self.source, mosaic)


def plan_mosaics(source: CutoutSource, config: UouoConfig, neighbours: CategoryNeighbours) -> list[PlannedMosaic]:
    """Every mosaic's plan, each with its own generator (``mosaic_rng(seed, index)``) as planning left it."""
    sizes = [len(source.items[name]) for name in source.categories]
    planned = []
    for index in progress_bar(range(config.num_mosaics), desc=f"planning uouo-{config.name}",
                              disable=not config.progress):
        rng = mosaic_rng(config.seed, index)
        planned.append(PlannedMosaic(index, plan_mosaic(config.name, rng, sizes, neighbours), rng))
    return planned


cached_crop: Callable[[Cutout], Image.Image] = functools.lru_cache(maxsize=CROP_CACHE_SIZE)(cutout_crop)
""":func:`~rf100vl_hf.uouo.sources.cutout_crop`, remembered per process."""


def render_mosaic(
    source: CutoutSource, mosaic: PlannedMosaic, crop: Callable[[Cutout], Image.Image] = cached_crop
) -> dict[str, Any]:
    """Mosaic ``mosaic.index`` as a row of :func:`features` (``crop`` reads a cut-out's object)."""
    plan = mosaic.plan
    rng = copy.deepcopy(mosaic.rng)  # the planned mosaic stays reusable
    names = [source.categories[c] for c in plan.categories]
    cutouts = [source.items[name][item] for name, item in zip(names, plan.items)]
    drawn = composer.compose([crop(c) for c in cutouts], rng)
    target = plan.target
    return {
        "image": {"bytes": composer.encode_png(drawn.image), "path": f"mosaic_{mosaic.index:06d}.png"},
        "mosaic_id": mosaic.index,
        "objects": {
            "category": names,
            "box": [list(map(float, b)) for b in drawn.boxes],
            "box_norm": drawn.boxes_norm,
            "quadrant": list(QUADRANTS),
            "source_id": [c.source_id for c in cutouts],
            "source_box": [list(c.alpha_box) for c in cutouts],
            "scale": [p.scale for p in drawn.placements],
            "flip": [p.flip for p in drawn.placements],
            "offset": [list(p.offset) for p in drawn.placements],
            "size": [list(p.size) for p in drawn.placements],
            "mmd2_to_anchor": plan.mmd2_to_target,
        },
        "target_index": target,
        "target_category": names[target],
        "target_quadrant": QUADRANTS[target],
        "target_box": list(map(float, drawn.boxes[target])),
        "target_box_norm": drawn.boxes_norm[target],
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
    clip_model: str = DEFAULT_CLIP_MODEL,
    clip_pretrained: str | None = DEFAULT_CLIP_PRETRAINED,
    device: str | None = None,
    min_images: int = MIN_IMAGES,
    progress: bool = True,
    num_proc: int = 1,
    **parameters: Any,
) -> Uouo:
    """A builder of ``config`` over the cut-outs of ``source_dir`` (see :func:`locate_source`).

    ``parameters`` set :class:`UouoConfig` fields (``num_mosaics``, ``seed``, ``sigma``,
    ``route``, ``alpha_threshold``, ``embedding_cache``); ``clip_pretrained=None`` is the
    seeded random initialisation. ``None`` values keep the defaults.
    """
    known = set(PARAMETERS) | {"alpha_threshold", "embedding_cache"}
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise TypeError(f"unknown UOUO parameters {unknown}; known: {', '.join(sorted(known))}")
    given = {key: value for key, value in parameters.items() if value is not None}
    return Uouo(
        config_name=config, cache_dir=str(cache_dir) if cache_dir else None,
        source_dir=str(source_dir) if source_dir is not None else None, clip_model=clip_model,
        clip_pretrained=RANDOM_INIT if clip_pretrained is None else clip_pretrained, device=device,
        min_images=min_images, progress=progress, num_proc=num_proc, **given,
    )


def load_uouo(
    config: str = "mmd",
    split: str | None = "test",
    source_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    clip_model: str = DEFAULT_CLIP_MODEL,
    clip_pretrained: str | None = DEFAULT_CLIP_PRETRAINED,
    device: str | None = None,
    progress: bool = True,
    num_proc: int = 1,
    **parameters: Any,
) -> datasets.Dataset | datasets.DatasetDict:
    """Prepare ``config`` if its cache is missing or stale, then load it (``split=None``: all splits).

    ``num_proc`` processes compose the mosaics (:func:`rf100vl_hf.uouo.defaults.default_num_proc`
    gives this machine's cores); the rows do not depend on it."""
    builder = uouo_builder(config, source_dir, cache_dir, clip_model, clip_pretrained, device, progress=progress,
                           num_proc=num_proc, **parameters)
    builder.download_and_prepare()
    return builder.as_dataset(split=split)


def _register_with_datasets() -> None:
    """Make ``datasets.load_dataset_builder("rf100vl_hf.uouo.builder", CONFIG, data_dir=SOURCE, ...)``
    (and ``load_dataset``) build :class:`Uouo`: datasets resolves a name that is not a path
    or a Hub repository through its table of packaged builders."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    _PACKAGED_DATASETS_MODULES.setdefault(__name__, (__name__, f"uouo-format-{FORMAT_VERSION}"))


_register_with_datasets()
