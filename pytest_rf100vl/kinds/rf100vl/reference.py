"""Published numbers to compare a run with: the RF100-VL paper's Table 2 (all 100 datasets)
and Table 3 (RF20-VL), shipped in ``rf100vl_hf/rf100vl/data/paper_tables.csv``.

A model is matched to a row of the table by :data:`PAPER_METHODS` (adapter name and prompt
mode; a row may also require a word in the checkpoint, for models the paper ran at one
size), or by ``--rf100vl-reference-method SPEC=ROW`` for any other model:

=================  ============  ===========  ======================================
adapter            prompt        checkpoint   paper row
=================  ============  ===========  ======================================
owlv2              names                      OWLv2 (class names only)
grounding-dino     names                      GroundingDINO
qwen2.5-vl         names         72B          Qwen 2.5 VL 72B (class names only)
qwen2.5-vl         instructions  72B          Qwen 2.5 VL 72B (instructions only)
=================  ============  ===========  ======================================

A domain is compared only once every catalogue dataset of that domain (in the subset run:
all, or rf20vl for Table 3) has a score, because the paper's number is a mean over all of
them; ``All`` only once every domain is complete.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

TABLES = {"all": "rf100vl_table2", "rf20vl": "rf20vl_table3"}
"""The paper table that matches each subset."""


@dataclass(frozen=True)
class PaperMethod:
    adapter: str
    prompt: str
    row: str
    checkpoint_word: str | None = None


PAPER_METHODS: tuple[PaperMethod, ...] = (
    PaperMethod("owlv2", "names", "OWLv2 (class names only)"),
    PaperMethod("grounding-dino", "names", "GroundingDINO"),
    PaperMethod("qwen2.5-vl", "names", "Qwen 2.5 VL 72B (class names only)", "72B"),
    PaperMethod("qwen2.5-vl", "instructions", "Qwen 2.5 VL 72B (instructions only)", "72B"),
)


@cache
def paper_table(table: str) -> dict[str, dict[str, float]]:
    """Method row -> column (domain or ``All``) -> AP50:95 in percent, for one paper table."""
    text = resources.files("rf100vl_hf.rf100vl").joinpath("data/paper_tables.csv").read_text("utf-8")
    rows = [row for row in csv.DictReader(text.splitlines()) if row["table"] == table]
    if not rows:
        raise KeyError(f"no paper table {table!r} in paper_tables.csv")
    skip = {"table", "setting", "method"}
    return {row["method"]: {k: float(v) for k, v in row.items() if k not in skip and v} for row in rows}


def paper_row(spec: str, checkpoint: str | None, prompt: str, overrides: dict[str, str]) -> str | None:
    """The paper row that ``spec`` (run with ``prompt``) reproduces, if any."""
    name = spec.partition(":")[0]
    for key in (spec, name):
        if key in overrides:
            return overrides[key]
    for method in PAPER_METHODS:
        if method.adapter == name and method.prompt == prompt:
            if method.checkpoint_word is None or method.checkpoint_word.lower() in (checkpoint or "").lower():
                return method.row
    return None
