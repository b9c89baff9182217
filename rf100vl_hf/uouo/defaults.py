"""UOUO defaults and names, in a module that imports nothing heavy.

The command line and the pytest plugin read their option defaults here, and the settings of
a build they both take (:data:`BUILD_SETTINGS`), so asking for ``--help`` does not import
torch, open_clip or datasets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

MODES: tuple[str, ...] = ("random", "mmd")
"""The configs: how a mosaic's four categories are chosen (:mod:`rf100vl_hf.uouo.plan`)."""
ROUTES: tuple[str, ...] = ("auto", "exact", "means")
"""How nearest categories are found (:mod:`rf100vl_hf.uouo.mmd`)."""
DEFAULT_NUM_MOSAICS = 200
"""Enough for a standard error of about 3.5 points on quadrant accuracy; raise it for a large source."""
DEFAULT_SEED = 0
DEFAULT_SIGMA = 10.0
DEFAULT_ROUTE = "auto"
EXACT_LIMIT = 64
"""Up to this many categories the ``auto`` route computes the exact C x C matrix. Exact MMD
grows as C^2 while the measured mean-embedding route costs about the same from 64 categories
to 2,048 (its check of 256 anchors, a second or two of CPU time): past 64 the measured route is
the cheaper one, so time grows with the categories with no cliff (``benchmarks/test_uouo_speed.py``)."""
AGREEMENT_SAMPLE = 256
"""Anchors on which ``auto`` measures the mean-embedding route's agreement with exact MMD."""
MIN_AGREEMENT = 0.95
"""Fewest anchors (fraction) whose top 3 must agree for ``auto`` to keep the mean-embedding route."""
DEFAULT_CLIP_MODEL = "ViT-B-32"
DEFAULT_CLIP_PRETRAINED = "laion2b_s34b_b79k"
RANDOM_INIT = "none"
"""``clip_pretrained`` value (in a builder config) for a seeded random initialisation."""
DEFAULT_ALPHA_THRESHOLD = 8
"""Alpha at or below this is background (see :mod:`rf100vl_hf.uouo.sources`)."""
MAX_DEFAULT_NUM_PROC = 8


@dataclass(frozen=True)
class BuildSetting:
    """A setting of the UOUO build that ``rf100vl-hf uouo`` (``--option KEY=VALUE``) and the
    plugin (``--uouo-option KEY=VALUE``) both take, declared once here: each derives its own
    option from it. ``kind`` is ``int`` or ``str``; an ``int`` lies in ``minimum..maximum``
    (``None``: unbounded); ``none``: the word ``none`` stands for no value (seeded random weights)."""

    key: str
    kind: str
    default: Any
    help: str
    metavar: str
    minimum: int | None = None
    maximum: int | None = None
    none: bool = False

    @property
    def name(self) -> str:
        """The builder's parameter (``num_mosaics``)."""
        return self.key.replace("-", "_")

    @property
    def expected(self) -> str:
        """What a value must be, in words (``an integer of at least 1``)."""
        if self.kind != "int":
            return "text"
        if self.maximum is not None:
            return f"an integer in {self.minimum}..{self.maximum}"
        return "an integer" if self.minimum is None else f"an integer of at least {self.minimum}"

    def allows(self, value: Any) -> bool:
        """Whether ``value`` (of the setting's kind) is within its bounds."""
        return self.kind != "int" or ((self.minimum is None or value >= self.minimum)
                                      and (self.maximum is None or value <= self.maximum))


BUILD_SETTINGS: dict[str, BuildSetting] = {setting.key: setting for setting in (
    BuildSetting("num-mosaics", "int", DEFAULT_NUM_MOSAICS, "mosaics per config", "N", minimum=1),
    BuildSetting("seed", "int", DEFAULT_SEED, "seed of the mosaics", "N", minimum=0),
    BuildSetting("clip-model", "str", DEFAULT_CLIP_MODEL, "open_clip model that embeds the images", "NAME"),
    BuildSetting("clip-pretrained", "str", DEFAULT_CLIP_PRETRAINED, "its weights: an open_clip tag (downloaded "
                 "once), a local weights file, or 'none' for seeded random weights", "TAG_OR_FILE", none=True),
    BuildSetting("alpha-threshold", "int", DEFAULT_ALPHA_THRESHOLD, "cut-out alpha at or below this is background, "
                 "the faint haze background removers leave (see docs/uouo.md)", "N", minimum=0, maximum=254),
)}
"""The settings both routes to a UOUO build take, with the builder's defaults."""


def default_num_proc() -> int:
    """Worker processes for building mosaics on this machine: the usable cores, at most
    :data:`MAX_DEFAULT_NUM_PROC` (PNG encoding is the bulk of the work and scales with cores)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_NUM_PROC))


def check_route(route: str) -> str:
    """``route`` when it is one of :data:`ROUTES`; ``ValueError`` otherwise."""
    if route not in ROUTES:
        raise ValueError(f"unknown neighbour route {route!r}; one of {', '.join(ROUTES)}")
    return route


def resolve_route(route: str, num_categories: int) -> str:
    """The route known before any embedding: ``route`` itself, or for ``auto`` ``exact`` up to
    :data:`EXACT_LIMIT` categories and ``auto`` above (decided by measurement at build time)."""
    check_route(route)
    return "exact" if route == "auto" and num_categories <= EXACT_LIMIT else route


# The curation of raw images into cut-outs (rf100vl-hf uouo curate; docs/uouo.md, "Curation").
CURATE_CLIP_MODEL = "EVA02-B-16"
"""The paper cites EVA-CLIP without naming a size; this is open_clip's smallest EVA-CLIP (ViT-B/16)."""
CURATE_CLIP_PRETRAINED = "merged2b_s8b_b131k"
CURATE_MIN_IMAGES = 5
"""A category left with fewer images is dropped (the paper's minimum, Appendix A)."""
DEFAULT_REMOVER = "isnet-general-use"
"""rembg's permissively licensed general model (Apache-2.0); the paper's BRIA RMBG-1.4 is non-commercial."""
TINY_REMOVER = "tiny"
"""``--remover tiny``: a seeded random ONNX remover built offline (tests and smoke runs)."""
DEFAULT_MAX_SIDE = 1024
"""Longest side a cut-out is made at: a mosaic cell is 400 pixels, so larger photos are reduced first."""
