"""Published numbers to compare a run with (``--rf100vl-reference``), each in the section of
the run's data regime (``--rf100vl-train``): a fine-tuned model never meets a zero-shot row.

- ``paper`` (the default): the RF100-VL paper's Table 2 (all 100 datasets, zero-shot and
  few-shot), Table 7 (semi- and fully supervised) and Table 3 (RF20-VL), per domain and
  ``All``, shipped in ``rf100vl_hf/data/paper_tables.csv``. They are copied from the
  paper's first arXiv version, 2505.20612v1 (May 2025; every row's ``source`` says so). That
  version is told apart by its numbers: Table 2 gives GroundingDINO (fine-tuned) 33.3 and
  Table 7 LW-DETRs 58.0 and LW-DETRm 59.4, the numbers the roboflow/rf-detr README quoted
  from July 2025 until January 2026; later citations of the paper (the SAM 3 paper's
  Table 36; the rf-detr README since its commit e44554c, 2026-01-21) give 33.7 for
  GroundingDINO (fine-tuned) and 57.4 and 59.8 for LW-DETR S and M, which the ``leaderboard``
  table holds.
- ``leaderboard``: newer published results on RF100-VL, ``All`` only (no per-domain means):
  the roboflow/rf-detr README's RF100-VL AP50:95 column (RF-DETR, D-FINE, LW-DETR, YOLO26,
  YOLO11, all fully supervised) and the SAM 3 paper's Table 36 (SAM 3 and Grounding DINO),
  shipped in ``rf100vl_hf/data/leaderboard.csv`` with each row's source and version.
  RF100-VL only: a run over RF20-VL has no leaderboard row.

A model is matched to a row of the section by :data:`PAPER_METHODS` or
:data:`LEADERBOARD_METHODS` (adapter name, prompt mode and regime; a row may also require a
size word in the checkpoint, a recipe, or the federated loss), or by
``--rf100vl-reference-method SPEC=ROW`` for any other model. A checkpoint word matches as a
whole word of the checkpoint (``large`` is in ``rf-detr-large`` but not in
``rf-detr-xlarge``); any of a row's words will do. ``paper``:

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

and likewise for the s and m sizes of YOLOv8 and YOLO11. ``leaderboard`` (prompt ``names``;
the fine-tuned rows by the recipe named, any recipe where none is):

=================  ================  ==========================================  ==================================
adapter            regime            checkpoint words, recipe                    leaderboard row
=================  ================  ==========================================  ==================================
rf-detr            fully-supervised  nano / small / medium / large / xlarge      RF-DETR N / S / M / L / XL / 2XL
                                     (xl) / 2xlarge (2xl, xxlarge), or n / s /
                                     m / l; detr-finetune
d-fine             fully-supervised  nano / small / medium / large / xlarge,     D-FINE N / S / M / L / X
                                     or n / s / m / l / x; detr-finetune
lw-detr            fully-supervised  tiny / small / medium / large / xlarge,     LW-DETR T / S / M / L / X
                                     or t / s / m / l / x; detr-finetune
yolo               fully-supervised  yolo26n ... yolo26x; ultralytics            YOLO26 N ... X
yolo               fully-supervised  yolo11n ... yolo11x; ultralytics            YOLO11 N ... X
sam3               zero-shot                                                     SAM 3 (zero-shot)
sam3               few-shot                                                      SAM 3 (10-shot, fine-tuned)
sam3               fully-supervised                                              SAM 3 (fully fine-tuned)
grounding-dino     zero-shot                                                     Grounding DINO
grounding-dino     few-shot          (without the federated loss)                Grounding DINO (fine-tuned)
=================  ================  ==========================================  ==================================

The SAM 3 paper's 10-shot column is fine-tuned on the ten shots (Grounding DINO's beside it
is "10-shot fine-tuned"), so its row is the few-shot regime's; SAM 3 prompted with the
few-shot images as visual exemplars and not fine-tuned (``--rf100vl-prompt fewshot``) is
another method and has no row.

A domain is compared only once every catalogue dataset of that domain (in the subset run:
all, or rf20vl for Table 3) has a score, because the published number is a mean over all of
them; ``All`` only once every domain is complete.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

TABLES = {"all": "rf100vl_table2", "rf20vl": "rf20vl_table3"}
"""The paper table that matches each subset (zero- and few-shot)."""
SUPERVISED_TABLES = {"all": "rf100vl_table7"}
"""Where the semi- and fully supervised sections are (the paper has none for RF20-VL)."""
LEADERBOARD = "leaderboard"
"""The leaderboard's one table (RF100-VL's ``All``)."""
REFERENCES = ("paper", LEADERBOARD)
"""The values of ``--rf100vl-reference``."""
SETTINGS = {"zero-shot": "zero-shot", "few-shot": "few-shot-10", "semi-supervised": "semi-supervised-10pct",
            "fully-supervised": "fully-supervised"}
"""The tables' ``setting`` of each data regime."""


def table_of(subset: str, regime: str, reference: str = "paper") -> str | None:
    """The ``reference`` table holding ``regime``'s section for ``subset`` (``None``: it has none)."""
    if reference == LEADERBOARD:
        return LEADERBOARD if subset == "all" else None
    return (TABLES if regime in ("zero-shot", "few-shot") else SUPERVISED_TABLES).get(subset)


@dataclass(frozen=True)
class PaperMethod:
    """How a run finds its row: ``checkpoint_words`` (any of them, as a whole word of the
    checkpoint; none: any checkpoint), ``recipe`` (``None``: any recipe)."""

    adapter: str
    prompt: str
    row: str
    checkpoint_words: tuple[str, ...] = ()
    regime: str = "zero-shot"
    recipe: str | None = None
    federated: bool = False

    def matches(self, checkpoint: str | None) -> bool:
        if not self.checkpoint_words:
            return True
        words = set(re.split(r"[^a-z0-9]+", (checkpoint or "").lower()))
        return any(word.lower() in words for word in self.checkpoint_words)


def _yolo_rows() -> tuple[PaperMethod, ...]:
    """Tables 2 and 7's YOLO rows: YOLOv8 n/s/m in every fine-tuned regime (with the federated
    loss for few-shot, with STAC for semi-supervised), YOLO11 n/s/m fully supervised."""
    variants = (("few-shot", "", "ultralytics", False), ("few-shot", " w/ federated loss", "ultralytics", True),
                ("semi-supervised", "", "ultralytics", False), ("semi-supervised", " w/ STAC", "stac", False),
                ("fully-supervised", "", "ultralytics", False))
    v8 = tuple(PaperMethod("yolo", "names", f"YOLOv8{size}{suffix}", (f"yolov8{size}",), regime, recipe, federated)
               for size in "nsm" for regime, suffix, recipe, federated in variants)
    return v8 + tuple(PaperMethod("yolo", "names", f"YOLOv11{size}", (f"yolo11{size}",), "fully-supervised",
                                  "ultralytics") for size in "nsm")


PAPER_METHODS: tuple[PaperMethod, ...] = (
    PaperMethod("owlv2", "names", "OWLv2 (class names only)"),
    PaperMethod("grounding-dino", "names", "GroundingDINO"),
    PaperMethod("grounding-dino", "names", "GroundingDINO (fine-tuned)", regime="few-shot"),
    PaperMethod("qwen2.5-vl", "names", "Qwen 2.5 VL 72B (class names only)", ("72B",)),
    PaperMethod("qwen2.5-vl", "instructions", "Qwen 2.5 VL 72B (instructions only)", ("72B",)),
    PaperMethod("lw-detr", "names", "LW-DETRs", ("small",), regime="fully-supervised"),
    PaperMethod("lw-detr", "names", "LW-DETRm", ("medium",), regime="fully-supervised"),
    *_yolo_rows(),
)

SIZE_WORDS: dict[str, tuple[str, ...]] = {
    "N": ("nano", "n"), "T": ("tiny", "t"), "S": ("small", "s"), "M": ("medium", "m"), "L": ("large", "l"),
    "X": ("xlarge", "x"), "XL": ("xlarge", "xl"), "2XL": ("2xlarge", "2xl", "xxlarge"),
}
"""The checkpoint words of each size letter of the leaderboard's rows."""


def _sized(adapter: str, family: str, sizes: tuple[str, ...]) -> tuple[PaperMethod, ...]:
    """A closed-set DETR's fully supervised leaderboard rows, one per size (recipe ``detr-finetune``)."""
    return tuple(PaperMethod(adapter, "names", f"{family} {size}", SIZE_WORDS[size], "fully-supervised",
                             "detr-finetune") for size in sizes)


LEADERBOARD_METHODS: tuple[PaperMethod, ...] = (
    *_sized("rf-detr", "RF-DETR", ("N", "S", "M", "L", "XL", "2XL")),
    *_sized("d-fine", "D-FINE", ("N", "S", "M", "L", "X")),
    *_sized("lw-detr", "LW-DETR", ("T", "S", "M", "L", "X")),
    *(PaperMethod("yolo", "names", f"YOLO{version} {size}", (f"yolo{version}{size.lower()}",), "fully-supervised",
                  "ultralytics") for version in ("26", "11") for size in "NSMLX"),
    PaperMethod("sam3", "names", "SAM 3"),
    PaperMethod("sam3", "names", "SAM 3", regime="few-shot"),
    PaperMethod("sam3", "names", "SAM 3", regime="fully-supervised"),
    PaperMethod("grounding-dino", "names", "Grounding DINO"),
    PaperMethod("grounding-dino", "names", "Grounding DINO (fine-tuned)", regime="few-shot"),
)
METHODS = {"paper": PAPER_METHODS, LEADERBOARD: LEADERBOARD_METHODS}


def _csv_rows(name: str) -> list[dict[str, str]]:
    text = resources.files("rf100vl_hf").joinpath(f"data/{name}").read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


@cache
def paper_table(table: str, regime: str | None = None) -> dict[str, dict[str, float]]:
    """Method row -> column (domain or ``All``) -> AP50:95 in percent, for one paper table (its
    section of ``regime`` only, when given: Table 7 has a YOLOv8m row in two sections)."""
    rows = [row for row in _csv_rows("paper_tables.csv") if row["table"] == table
            and (regime is None or row["setting"] == SETTINGS[regime])]
    if not rows:
        raise KeyError(f"no paper table {table!r}" + (f" section {regime!r}" if regime else "") + " in paper_tables.csv")
    skip = {"table", "setting", "method", "source"}
    return {row["method"]: {k: float(v) for k, v in row.items() if k not in skip and v} for row in rows}


@cache
def leaderboard_rows(regime: str) -> dict[str, dict[str, str]]:
    """Method row -> its ``All``, ``source`` and ``version``, in ``regime``'s section of the leaderboard."""
    return {row["method"]: row for row in _csv_rows("leaderboard.csv") if row["setting"] == SETTINGS[regime]}


def reference_table(reference: str, table: str, regime: str) -> dict[str, dict[str, float]]:
    """Method row -> column -> AP50:95 in percent, in ``regime``'s section of a ``reference`` table."""
    if reference == LEADERBOARD:
        from rf100vl_hf.metrics import ALL

        return {method: {ALL: float(row["All"])} for method, row in leaderboard_rows(regime).items()}
    return paper_table(table, regime)


def reference_source(reference: str, table: str, regime: str, method: str) -> str:
    """Where a row's numbers come from, as a check's message names them."""
    if reference == LEADERBOARD:
        row = leaderboard_rows(regime)[method]
        return f"leaderboard ({row['source']}, {row['version']}; {regime}, {method!r})"
    return f"paper ({table} of arXiv 2505.20612v1, {regime}, {method!r})"


def paper_row(spec: str, checkpoint: str | None, prompt: str, overrides: dict[str, str], regime: str = "zero-shot",
              recipe: str | None = None, federated: bool = False, reference: str = "paper") -> str | None:
    """The ``reference`` row that ``spec`` (run with ``prompt``, in ``regime``, fine-tuned by
    ``recipe`` with or without the federated loss) reproduces, if any."""
    name = spec.partition(":")[0]
    for key in (spec, name):
        if key in overrides:
            return overrides[key]
    for method in METHODS[reference]:
        if (method.adapter, method.prompt, method.regime, method.federated) == (name, prompt, regime, federated) \
                and method.recipe in (None, recipe) and method.matches(checkpoint):
            return method.row
    return None
