"""UOUO: mosaics of four uncommon objects, asked "where is X" (a box) and "which quadrant".

No official UOUO code or data is public; this package's spec is DESIGN.md section 2 and
is documented module by module: :mod:`.sources` (reading cut-outs), :mod:`.embeddings`
(CLIP), :mod:`.mmd` (category distances), :mod:`.plan` and :mod:`.compose` (mosaics),
:mod:`.prompts` (the two questions), :mod:`.builder` (the ``uouo`` datasets builder) and
:mod:`.hub_card` (the Hub repository).
"""

from rf100vl_hf.uouo.builder import Uouo, UouoConfig, load_uouo, locate_source, uouo_builder
from rf100vl_hf.uouo.prompts import QUADRANTS, box_prompt, quadrant_prompt
from rf100vl_hf.uouo.sources import CutoutSource, read_source

__all__ = [
    "QUADRANTS",
    "CutoutSource",
    "Uouo",
    "UouoConfig",
    "box_prompt",
    "load_uouo",
    "locate_source",
    "quadrant_prompt",
    "read_source",
    "uouo_builder",
]
