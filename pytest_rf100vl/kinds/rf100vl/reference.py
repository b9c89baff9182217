"""Published numbers to compare a run with (``--rf100vl-data-option reference=...``), each in the section of
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

- ``detpo``: the DetPO paper's RF20-VL board (arXiv 2603.23455v1, code ggare-cmu/DetPO at
  4e0f960; Tables 1-4), ``All`` only, zero-shot section, shipped in
  ``rf100vl_hf/data/detpo_tables.csv`` with each row's table, version, commit and the protocol
  where it differs from the paper's (the serving engine, self-reported or VQA scores).

Every row carries the version it copies; ``--rf100vl-data-option=reference=SOURCE@VERSION`` keeps the rows
whose publication or version contains VERSION (:class:`ReferenceChoice`). A check names the row
it compared with and the rows other tables give the same model (:func:`other_rows` in
``checks.py``), so two published numbers for one model are never mixed up silently.

A model is matched to a row of the section by :data:`PAPER_METHODS`, :data:`DETPO_METHODS` or
:data:`LEADERBOARD_METHODS` (adapter name, prompt mode and regime; a row may also require a
size word in the checkpoint, a recipe, or the federated loss), or by
``--rf100vl-data-option reference-method=SPEC=ROW`` for any other model. A checkpoint word matches as a
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

from rf100vl_hf.specs import ModelSpec

TABLES = {"all": "rf100vl_table2", "rf20vl": "rf20vl_table3"}
"""The paper table that matches each subset (zero- and few-shot)."""
SUPERVISED_TABLES = {"all": "rf100vl_table7"}
"""Where the semi- and fully supervised sections are (the paper has none for RF20-VL)."""
LEADERBOARD = "leaderboard"
"""The leaderboard's one table (RF100-VL's ``All``)."""
DETPO = "detpo"
DETPO_TABLE = "detpo_rf20vl"
"""The DetPO paper's RF20-VL board, its one table (the paper's own table of each row is in its ``paper_table``)."""
FILES = {"paper": "paper_tables.csv", LEADERBOARD: "leaderboard.csv", DETPO: "detpo_tables.csv"}
"""Each reference's file in ``rf100vl_hf/data``."""
REFERENCES = tuple(FILES)
"""The sources ``--rf100vl-data-option reference=...`` names (``SOURCE`` or ``SOURCE@VERSION``)."""
SETTINGS = {"zero-shot": "zero-shot", "few-shot": "few-shot-10", "semi-supervised": "semi-supervised-10pct",
            "fully-supervised": "fully-supervised"}
"""The tables' ``setting`` of each data regime."""
DESCRIBED = ("table", "setting", "method", "source", "version", "commit", "protocol", "paper_table")
"""The columns of a reference file that describe a row rather than give an AP."""


@dataclass(frozen=True)
class PublishedRow:
    """One row of a reference file: AP50:95 in percent per column (domains, ``All``), and what
    it copies: ``origin`` (the publication), ``version`` (its version, or the commit of a
    README), and for a paper re-run with code, ``details`` (its table, commit, protocol)."""

    reference: str
    table: str
    setting: str
    method: str
    values: dict[str, float]
    origin: str
    version: str
    details: str = ""

    def describe(self) -> str:
        """The row as the summary names it: source, table, method, publication and version."""
        table = f" {self.table}" if self.table != self.reference else ""
        version = "" if self.version in self.origin else self.version
        said = "; ".join(filter(None, (self.origin, version, self.details)))
        return f"{self.reference}{table} row {self.method!r} ({said})"


@dataclass(frozen=True)
class ReferenceChoice:
    """``--rf100vl-data-option reference=SOURCE[@VERSION]``: the rows of one source, and of one version of
    it when given (matched as a part of the rows' publication or ``version``, case-insensitive:
    ``paper@2505.20612v1``, ``leaderboard@35ac6ab``, ``leaderboard@2511.16719``)."""

    source: str
    version: str | None = None

    def __str__(self) -> str:
        return self.source + (f"@{self.version}" if self.version else "")

    def takes(self, row: PublishedRow) -> bool:
        return self.version is None or self.version.lower() in f"{row.origin} {row.version}".lower()


def parse_reference(value: str) -> ReferenceChoice:
    """``SOURCE[@VERSION]``, refused with the sources, or the versions the source holds."""
    source, _, version = value.partition("@")
    if source not in REFERENCES:
        raise ValueError(f"unknown reference {source!r} (use one of {', '.join(REFERENCES)}, optionally @VERSION)")
    choice = ReferenceChoice(source, version.strip() or None)
    if not any(choice.takes(row) for row in published_rows(source)):
        versions = sorted({row.version for row in published_rows(source)})
        raise ValueError(f"no {source} row copies a version matching {version!r}; its versions: {'; '.join(versions)}")
    return choice


def table_of(subset: str, regime: str, reference: str = "paper") -> str | None:
    """The ``reference`` table holding ``regime``'s section for ``subset`` (``None``: it has none)."""
    if reference == LEADERBOARD:
        return LEADERBOARD if subset == "all" else None
    if reference == DETPO:
        return DETPO_TABLE if subset == "rf20vl" and regime == "zero-shot" else None
    return (TABLES if regime in ("zero-shot", "few-shot") else SUPERVISED_TABLES).get(subset)


@dataclass(frozen=True)
class PaperMethod:
    """How a run finds its row: ``checkpoint_words`` (any of them, as a whole word of the
    checkpoint, or as consecutive words: ``3-pro`` is in ``gemini-3-pro-preview``; none: any
    checkpoint), ``recipe`` (``None``: any recipe), the adapter's ``scores`` option (chat
    models; ``one``: every box 1.0, the papers' protocol) and whether a prompt file gave the
    instructions (``prompt_file``)."""

    adapter: str
    prompt: str
    row: str
    checkpoint_words: tuple[str, ...] = ()
    regime: str = "zero-shot"
    recipe: str | None = None
    federated: bool = False
    scores: str = "one"
    prompt_file: bool = False

    def matches(self, checkpoint: str | None) -> bool:
        if not self.checkpoint_words:
            return True
        words = _words(checkpoint or "")
        return any(_contains(words, _words(word)) for word in self.checkpoint_words)


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[^a-z0-9]+", text.lower()) if word]


def _contains(words: list[str], part: list[str]) -> bool:
    return any(words[i:i + len(part)] == part for i in range(len(words) - len(part) + 1))


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

DETPO_MODES = {"names": "class names", "instructions": "instructions", "instructions+fewshot": "instructions + images"}
"""The prompt mode of each setting of the DetPO board's chat-model rows."""
DETPO_CHAT = (("Gemini 3 Pro", ("gemini",), "3-pro"), ("Qwen3-VL 8B", ("qwen3-vl", "openai"), "8b"),
              ("Qwen3-VL 30B-A3B", ("qwen3-vl", "openai"), "30b-a3b"),
              ("Qwen2.5-VL 7B", ("qwen2.5-vl", "openai"), "7b"), ("Qwen2.5-VL 72B", ("qwen2.5-vl", "openai"), "72b"))
"""The DetPO board's chat models: the adapters that run them (a served Qwen through ``openai``,
as DetPO served it) and the checkpoint words that name the size."""

DETPO_METHODS: tuple[PaperMethod, ...] = (
    *(PaperMethod(adapter, mode, f"{model} ({setting})", (words,)) for model, adapters, words in DETPO_CHAT
      for adapter in adapters for mode, setting in DETPO_MODES.items()),
    PaperMethod("llmdet", "names", "LLMDet (class names)"),
    PaperMethod("sam3", "names", "SAM 3 (class names)"),
    PaperMethod("grounding-dino", "names", "Grounding DINO (class names)"),
    PaperMethod("yoloe", "names", "YOLO-E (class names)"),
    *(PaperMethod(adapter, "instructions", "Qwen3-VL 30B-A3B + DetPO" + suffix, ("30b-a3b",), scores=scores,
                  prompt_file=True)
      for adapter in ("qwen3-vl", "openai") for scores, suffix in (("ask", ""), ("vqa", " + VQA re-scoring"))),
    PaperMethod("gemini", "instructions", "Gemini 3 Pro + DetPO + VQA re-scoring", ("3-pro",), scores="vqa",
                prompt_file=True),
)
METHODS = {"paper": PAPER_METHODS, LEADERBOARD: LEADERBOARD_METHODS, DETPO: DETPO_METHODS}


def _csv_rows(name: str) -> list[dict[str, str]]:
    text = resources.files("rf100vl_hf").joinpath(f"data/{name}").read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


@cache
def published_rows(reference: str) -> tuple[PublishedRow, ...]:
    """Every row of a ``reference`` file, typed (the leaderboard's one table is :data:`LEADERBOARD`)."""
    rows = []
    for row in _csv_rows(FILES[reference]):
        details = "; ".join(f"{label}{row[key]}" for key, label in (("paper_table", ""), ("commit", "code: "),
                                                                    ("protocol", "protocol: ")) if row.get(key))
        rows.append(PublishedRow(reference, row.get("table") or LEADERBOARD, row["setting"], row["method"],
                                 {k: float(v) for k, v in row.items() if k not in DESCRIBED and v}, row["source"],
                                 row["version"], details))
    return tuple(rows)


def section_rows(reference: ReferenceChoice | str, table: str, regime: str) -> dict[str, PublishedRow]:
    """Method -> row, in ``regime``'s section of a ``reference`` table (of the chosen version only)."""
    choice = parse_reference(reference) if isinstance(reference, str) else reference
    return {row.method: row for row in published_rows(choice.source)
            if row.table == table and row.setting == SETTINGS[regime] and choice.takes(row)}


@cache
def paper_table(table: str, regime: str | None = None) -> dict[str, dict[str, float]]:
    """Method row -> column (domain or ``All``) -> AP50:95 in percent, for one paper table (its
    section of ``regime`` only, when given: Table 7 has a YOLOv8m row in two sections)."""
    rows = {row.method: row.values for row in published_rows("paper") if row.table == table
            and (regime is None or row.setting == SETTINGS[regime])}
    if not rows:
        raise KeyError(f"no paper table {table!r}" + (f" section {regime!r}" if regime else "") + " in paper_tables.csv")
    return rows


@cache
def leaderboard_rows(regime: str) -> dict[str, dict[str, str]]:
    """Method row -> its ``All``, ``source`` and ``version``, in ``regime``'s section of the leaderboard."""
    return {row["method"]: row for row in _csv_rows(FILES[LEADERBOARD]) if row["setting"] == SETTINGS[regime]}


def reference_table(reference: ReferenceChoice | str, table: str, regime: str) -> dict[str, dict[str, float]]:
    """Method row -> column -> AP50:95 in percent, in ``regime``'s section of a ``reference`` table."""
    return {method: row.values for method, row in section_rows(reference, table, regime).items()}


def reference_source(reference: ReferenceChoice | str, table: str, regime: str, method: str) -> str:
    """The row a run is compared with, as a check's message names it: its source, version and table."""
    return f"{section_rows(reference, table, regime)[method].describe()}, {regime}"


def paper_row(spec: ModelSpec, checkpoint: str | None, prompt: str, overrides: dict[str, str],
              regime: str = "zero-shot", recipe: str | None = None, federated: bool = False,
              reference: str = "paper", scores: str = "one", prompt_file: bool = False) -> str | None:
    """The ``reference`` row that ``spec`` (run with ``prompt``, in ``regime``, fine-tuned by
    ``recipe`` with or without the federated loss; a chat model scoring its boxes by
    ``scores``, told instructions from a prompt file or not) reproduces, if any."""
    for key in (spec.text, spec.name):
        if key in overrides:
            return overrides[key]
    for method in METHODS[reference]:
        if (method.adapter, method.prompt, method.regime, method.federated, method.scores, method.prompt_file) == \
                (spec.name, prompt, regime, federated, scores, prompt_file) \
                and method.recipe in (None, recipe) and method.matches(checkpoint):
            return method.row
    return None
