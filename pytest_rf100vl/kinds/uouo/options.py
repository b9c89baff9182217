"""The UOUO kind's options: where the cut-outs are and how the mosaics are made. Only what the
user set is passed on (:meth:`GroundingOptions.given`), so a run with none of them finds the
build the bare ``load_dataset("uouo", ...)`` call makes. Each is a key of
``--uouo-option KEY=VALUE`` and of the config file's ``uouo`` section."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_rf100vl.core.options import option

_option = functools.partial(option, prefix="uouo", via="option")
"""An option of the ``uouo`` section: ``--uouo-option NAME=VALUE``."""

NO_WEIGHTS = "none"
"""``--uouo-option clip-pretrained=none``: CLIP with seeded random weights (for tests)."""


def existing_folder(value: Path) -> Path:
    """A ``check`` for folders the run reads: one that does not exist is refused now."""
    if not Path(value).is_dir():
        raise ValueError(f"{value} is not a folder")
    return value


def _alpha(value: int) -> int:
    if value > 254:
        raise ValueError(f"expected an alpha value in 0..254, got {value}")
    return value


@dataclass(frozen=True)
class GroundingOptions:
    source: Path | None = _option("source", "path", "folder of UOUO cut-outs (default: $UOUO_SOURCE_DIR, else <cache "
                                  "home>/uouo-source when it exists, else the embedded sample)", "DIR",
                                  check=existing_folder)
    num_mosaics: int | None = _option("num-mosaics", "int", "mosaics per UOUO dataset (default: 200)", "N",
                                      minimum=1)
    seed: int | None = _option("seed", "int", "seed of the UOUO mosaics (default: 0)", "N", minimum=0)
    clip_model: str | None = _option("clip-model", "str", "open_clip model that ranks the hard mosaics' neighbours "
                                     "(default: ViT-B-32)", "NAME")
    clip_pretrained: str | None = _option(
        "clip-pretrained", "str", "its weights: an open_clip tag, a local weights file, or 'none' for seeded random "
        "weights (default: laion2b_s34b_b79k, downloaded once)", "TAG_OR_FILE")
    num_proc: int | None = _option("num-proc", "int", "processes composing the UOUO mosaics (default: the usable "
                                   "cores, at most 8; the mosaics do not depend on it)", "N", minimum=1)
    alpha_threshold: int | None = _option(
        "alpha-threshold", "int", "cut-out alpha at or below this is background, the faint haze background removers "
        "leave (default: 8; see docs/uouo.md)", "N", minimum=0, check=_alpha)

    def given(self) -> dict[str, Any]:
        """What ``load_uouo`` is given besides the config: only what the user set (the rest keeps
        ``load_uouo``'s defaults, so the bare ``load_dataset`` route finds the same build)."""
        given: dict[str, Any] = {
            "source_dir": self.source, "num_mosaics": self.num_mosaics, "seed": self.seed,
            "clip_model": self.clip_model, "clip_pretrained": self.clip_pretrained,
            "alpha_threshold": self.alpha_threshold,
        }
        parameters = {key: value for key, value in given.items() if value is not None}
        if self.clip_pretrained == NO_WEIGHTS:
            parameters["clip_pretrained"] = None
        return parameters
