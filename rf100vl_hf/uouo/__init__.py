"""UOUO: mosaics of four uncommon objects, asked "where is X" (a box) and "which quadrant".

No official UOUO code or data is public; this package's spec is in ``docs/uouo.md`` and is
documented module by module: :mod:`.sources` (reading cut-outs), :mod:`.embeddings`
(CLIP), :mod:`.mmd` (category distances), :mod:`.plan` and :mod:`.compose` (mosaics),
:mod:`.prompts` (the two questions), :mod:`.builder` (the ``uouo`` datasets builder),
:mod:`.defaults` (names and defaults); its Hub repository is :mod:`rf100vl_hf.hub.uouo_card`.
:mod:`.curate` turns a raw image collection into cut-outs, as the UOUO paper curated its own.

Names are imported on first use, so ``rf100vl_hf.uouo.defaults`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Uouo": "builder",
    "UouoConfig": "builder",
    "load_uouo": "builder",
    "locate_source": "builder",
    "uouo_builder": "builder",
    "default_num_proc": "defaults",
    "QUADRANTS": "prompts",
    "box_prompt": "prompts",
    "quadrant_prompt": "prompts",
    "CurateOptions": "curate",
    "curate": "curate",
    "CutoutSource": "sources",
    "read_source": "sources",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
