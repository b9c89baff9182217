"""Published numbers to compare a run with: the RF100-VL paper's Table 2 (all 100 datasets,
zero-shot and few-shot), Table 7 (semi- and fully supervised) and Table 3 (RF20-VL), shipped
in ``rf100vl_hf/rf100vl/data/paper_tables.csv``. A run is compared with the section of its
data regime (``--rf100vl-train``): a fine-tuned model never meets a zero-shot row.

A model is matched to a row of the section by :data:`PAPER_METHODS` (adapter name, prompt
mode and regime; a row may also require a word in the checkpoint, for models the paper ran
at one size, a recipe, or the federated loss), or by ``--rf100vl-reference-method SPEC=ROW``
for any other model:

=================  ============  ================  ===========  ==============================
adapter            prompt        regime            checkpoint   paper row
=================  ============  ================  ===========  ==============================
owlv2              names         zero-shot                      OWLv2 (class names only)
grounding-dino     names         zero-shot                      GroundingDINO
grounding-dino     names         few-shot                       GroundingDINO (fine-tuned)
qwen2.5-vl         names         zero-shot         72B          Qwen 2.5 VL 72B (class names only)
qwen2.5-vl         instructions  zero-shot         72B          Qwen 2.5 VL 72B (instructions only)
lw-detr            names         fully-supervised  small        LW-DETRs
lw-detr            names         fully-supervised  medium       LW-DETRm
yolo               names         few-shot          yolov8n      YOLOv8n (``federated=true``:
                                                                YOLOv8n w/ federated loss)
yolo               names         semi-supervised   yolov8n      YOLOv8n (recipe ``stac``:
                                                                YOLOv8n w/ STAC)
yolo               names         fully-supervised  yolov8n      YOLOv8n
yolo               names         fully-supervised  yolo11n      YOLOv11n
=================  ============  ================  ===========  ==============================

and likewise for the s and m sizes of YOLOv8 and YOLO11.

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
"""The paper table that matches each subset (zero- and few-shot)."""
SUPERVISED_TABLES = {"all": "rf100vl_table7"}
"""Where the semi- and fully supervised sections are (the paper has none for RF20-VL)."""
SETTINGS = {"zero-shot": "zero-shot", "few-shot": "few-shot-10", "semi-supervised": "semi-supervised-10pct",
            "fully-supervised": "fully-supervised"}
"""The paper tables' ``setting`` of each data regime."""


def table_of(subset: str, regime: str) -> str | None:
    """The paper table holding ``regime``'s section for ``subset`` (``None``: the paper has none)."""
    return (TABLES if regime in ("zero-shot", "few-shot") else SUPERVISED_TABLES).get(subset)


@dataclass(frozen=True)
class PaperMethod:
    adapter: str
    prompt: str
    row: str
    checkpoint_word: str | None = None
    regime: str = "zero-shot"
    recipe: str | None = None  # None: any recipe
    federated: bool = False


def _yolo_rows() -> tuple[PaperMethod, ...]:
    """Tables 2 and 7's YOLO rows: YOLOv8 n/s/m in every fine-tuned regime (with the federated
    loss for few-shot, with STAC for semi-supervised), YOLO11 n/s/m fully supervised."""
    variants = (("few-shot", "", "ultralytics", False), ("few-shot", " w/ federated loss", "ultralytics", True),
                ("semi-supervised", "", "ultralytics", False), ("semi-supervised", " w/ STAC", "stac", False),
                ("fully-supervised", "", "ultralytics", False))
    v8 = tuple(PaperMethod("yolo", "names", f"YOLOv8{size}{suffix}", f"yolov8{size}", regime, recipe, federated)
               for size in "nsm" for regime, suffix, recipe, federated in variants)
    return v8 + tuple(PaperMethod("yolo", "names", f"YOLOv11{size}", f"yolo11{size}", "fully-supervised",
                                  "ultralytics") for size in "nsm")


PAPER_METHODS: tuple[PaperMethod, ...] = (
    PaperMethod("owlv2", "names", "OWLv2 (class names only)"),
    PaperMethod("grounding-dino", "names", "GroundingDINO"),
    PaperMethod("grounding-dino", "names", "GroundingDINO (fine-tuned)", regime="few-shot"),
    PaperMethod("qwen2.5-vl", "names", "Qwen 2.5 VL 72B (class names only)", "72B"),
    PaperMethod("qwen2.5-vl", "instructions", "Qwen 2.5 VL 72B (instructions only)", "72B"),
    PaperMethod("lw-detr", "names", "LW-DETRs", "small", regime="fully-supervised"),
    PaperMethod("lw-detr", "names", "LW-DETRm", "medium", regime="fully-supervised"),
    *_yolo_rows(),
)


@cache
def paper_table(table: str, regime: str | None = None) -> dict[str, dict[str, float]]:
    """Method row -> column (domain or ``All``) -> AP50:95 in percent, for one paper table (its
    section of ``regime`` only, when given: Table 7 has a YOLOv8m row in two sections)."""
    text = resources.files("rf100vl_hf.rf100vl").joinpath("data/paper_tables.csv").read_text("utf-8")
    rows = [row for row in csv.DictReader(text.splitlines()) if row["table"] == table
            and (regime is None or row["setting"] == SETTINGS[regime])]
    if not rows:
        raise KeyError(f"no paper table {table!r}" + (f" section {regime!r}" if regime else "") + " in paper_tables.csv")
    skip = {"table", "setting", "method"}
    return {row["method"]: {k: float(v) for k, v in row.items() if k not in skip and v} for row in rows}


def paper_row(spec: str, checkpoint: str | None, prompt: str, overrides: dict[str, str], regime: str = "zero-shot",
              recipe: str | None = None, federated: bool = False) -> str | None:
    """The paper row that ``spec`` (run with ``prompt``, in ``regime``, fine-tuned by ``recipe``
    with or without the federated loss) reproduces, if any."""
    name = spec.partition(":")[0]
    for key in (spec, name):
        if key in overrides:
            return overrides[key]
    for method in PAPER_METHODS:
        if (method.adapter, method.prompt, method.regime, method.federated) == (name, prompt, regime, federated) \
                and method.recipe in (None, recipe):
            if method.checkpoint_word is None or method.checkpoint_word.lower() in (checkpoint or "").lower():
                return method.row
    return None
