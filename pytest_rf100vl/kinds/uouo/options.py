"""The UOUO kind's options: where the cut-outs are and how the mosaics are made. Only what the
user set is passed on (:meth:`GroundingOptions.given`), so a run with none of them finds the
build the bare ``load_dataset("uouo", ...)`` call makes. Each is a key of
``--uouo-option KEY=VALUE`` and of the config file's ``uouo`` section."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf.uouo.defaults import BUILD_SETTINGS, RANDOM_INIT

from pytest_rf100vl.core.options import option

_option = functools.partial(option, prefix="uouo", via="option")
"""An option of the ``uouo`` section: ``--uouo-option NAME=VALUE``."""


def existing_folder(value: Path) -> Path:
    """A ``check`` for folders the run reads: one that does not exist is refused now."""
    if not Path(value).is_dir():
        raise ValueError(f"{value} is not a folder")
    return value


def _build_option(key: str) -> Any:
    """A setting of the build (:data:`rf100vl_hf.uouo.defaults.BUILD_SETTINGS`, where ``rf100vl-hf
    uouo`` reads it too) as a key of ``--uouo-option``: unset (``None``) until given."""
    setting = BUILD_SETTINGS[key]

    def within(value: Any) -> Any:
        if not setting.allows(value):
            raise ValueError(f"expected {setting.expected}, got {value}")
        return value

    return _option(key, setting.kind, f"{setting.help} (default: {setting.default})", setting.metavar,
                   minimum=setting.minimum, check=within if setting.maximum is not None else None)


@dataclass(frozen=True)
class GroundingOptions:
    source: Path | None = _option("source", "path", "folder of UOUO cut-outs (default: $UOUO_SOURCE_DIR, else <cache "
                                  "home>/uouo-source when it exists, else the embedded sample)", "DIR",
                                  check=existing_folder)
    num_mosaics: int | None = _build_option("num-mosaics")
    seed: int | None = _build_option("seed")
    clip_model: str | None = _build_option("clip-model")
    clip_pretrained: str | None = _build_option("clip-pretrained")
    num_proc: int | None = _option("num-proc", "int", "processes composing the UOUO mosaics (default: the usable "
                                   "cores, at most 8; the mosaics do not depend on it)", "N", minimum=1)
    alpha_threshold: int | None = _build_option("alpha-threshold")

    def given(self) -> dict[str, Any]:
        """What ``load_uouo`` is given besides the config: only what the user set (the rest keeps
        ``load_uouo``'s defaults, so the bare ``load_dataset`` route finds the same build)."""
        given = {"source_dir": self.source, **{setting.name: getattr(self, setting.name)
                                                for setting in BUILD_SETTINGS.values()}}
        parameters = {key: value for key, value in given.items() if value is not None}
        for setting in BUILD_SETTINGS.values():
            if setting.none and parameters.get(setting.name) == RANDOM_INIT:
                parameters[setting.name] = None
        return parameters
