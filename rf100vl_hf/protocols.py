"""Scoring protocols of RF100-VL: how a pair is asked and scored, recorded in every row
(``protocol``) and part of its identity, so rows of two protocols never merge or rank together.

- ``paper`` (the default): the paper's protocol. pycocotools AP50:95 at maxDets 500; the
  export's category 0 (Roboflow's supercategory) is no class and is never prompted; each
  adapter's own post-processing (class-wise NMS where it has it).
- ``rf-scripts``: what Roboflow's public evaluation scripts in the rf100-vl repository do
  (``benchmark_owlv2.py``, ``benchmark_gdino_hf.py``, ``benchmark_sam3.py`` and their
  ``evaluate_*.py``): pycocotools' default maxDets 100 (``COCOeval.stats[0]``); every category
  of the annotation file prompted, category 0 included, as the OWLv2 script prompts it (its
  name, in the script's template, a query beside the classes: a box whose best query it is
  goes to category 0, which has no box in the ground truth, so pycocotools leaves it out of
  the mean, and it is no real class's box either); no class-wise NMS (the OWLv2 script keeps
  every box over its threshold); SAM 3 at score threshold 0.5 (one of the two published
  versions of ``benchmark_sam3.py``; the other defaults to 0.35). Category 0 is prompted for
  zero-shot pairs in ``names`` mode, what the scripts run; an export without a category 0
  (cleaned, or "COCO for MMDetection") has none to prompt. It covers the scripts of OWLv2,
  Grounding DINO and SAM 3 only: it is not ``benchmark_gemini.py`` (another prompt, and a
  missing confidence scored 0.0); chat models are asked the paper's prompts (``docs/prompts.md``).

What a protocol sets for one adapter (NMS off, a threshold) are adapter options, given by
the plugin as defaults that ``--rf100vl-adapter-option`` overrides
(``pytest_rf100vl/kinds/rf100vl/adapter_defaults.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    """``max_dets``: the maxDets AP and AR are read at; ``category_zero``: the export's category 0
    is prompted as a class (zero-shot ``names`` pairs); ``description``: one line for summaries."""

    name: str
    max_dets: int
    category_zero: bool
    description: str


PAPER = "paper"
PAPER_MAX_DETS = 500
"""The paper's maxDets (:data:`rf100vl_hf.boxes.MAX_DETECTIONS`, written out so that reading a
protocol imports no numpy: the plugin reads it when pytest starts)."""
PROTOCOLS: dict[str, Protocol] = {
    PAPER: Protocol(PAPER, PAPER_MAX_DETS, False, "the paper's: maxDets 500, category 0 never prompted"),
    "rf-scripts": Protocol("rf-scripts", 100, True, "Roboflow's public scripts: maxDets 100, category 0 prompted, "
                                                    "no class-wise NMS, SAM 3 at score 0.5"),
}

def get(name: str) -> Protocol:
    """The protocol called ``name``; ``ValueError`` listing the known ones."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]
