"""The RF100-VL Hub repository: export configs and write its dataset card.

Everything the card says about a dataset comes from the config's metadata (carried in its
``description``, see :mod:`rf100vl_hf.metadata`), so a card can be rewritten for configs
exported earlier: :func:`export_rf100vl` into an existing folder rebuilds the named
configs, keeps the others and lists them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.hub.card import CARD_FILE, config_metadata, read_card, write_card
from rf100vl_hf.hub.export import ConfigExport, staged_repository, write_config
from rf100vl_hf.rf100vl import catalog
from rf100vl_hf.rf100vl.builder import CITATION, rf100vl_builder
from rf100vl_hf.rf100vl.catalog import CUSTOM_DOMAIN, DOMAINS
from rf100vl_hf.rf100vl.sources import custom_exports, locate

PRETTY_NAME = "RF100-VL"
REPO_PLACEHOLDER = "ORG/NAME"
_SOURCE_SPLITS = ("train", "validation", "test")
_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def _size_category(configs: list[ConfigExport]) -> str:
    images = sum(s.num_rows for c in configs for s in c.splits if s.name in _SOURCE_SPLITS)
    return next((label for limit, label in _SIZE_CATEGORIES if images < limit), "n>1M")


def card_data(configs: list[ConfigExport]) -> dict[str, Any]:
    """The YAML fields of the card besides configs and dataset_info."""
    return {
        "license": "apache-2.0",
        "task_categories": ["object-detection"],
        "pretty_name": PRETTY_NAME,
        "size_categories": [_size_category(configs)],
        "tags": ["rf100vl", "roboflow", "object-detection", "few-shot", "vision-language", "coco"],
    }


def _cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _domain_order(domain: str) -> int:
    return DOMAINS.index(domain) if domain in DOMAINS else len(DOMAINS)


def _table(rows: list[tuple[ConfigExport, dict[str, Any]]]) -> str:
    split_names: list[str] = []
    for config, _ in rows:
        split_names += [s.name for s in config.splits if s.name not in split_names]
    header = ["dataset", "domain", "classes", *split_names, "few-shot split", "licence"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for config, meta in rows:
        counts = {s.name: str(s.num_rows) for s in config.splits}
        fewshot = meta["fewshot"]["source"] + (" (federated)" if meta["fewshot"].get("federated") else "")
        cells = [
            f"`{config.name}`",
            meta["domain"],
            str(len(meta["classes"])),
            *(counts.get(name, "-") for name in split_names),
            fewshot,
            meta.get("license") or "see the source export",
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def _instructions(config: ConfigExport, meta: dict[str, Any]) -> str:
    per_class = meta["instructions"]["classes"]
    blocks = [f"### `{config.name}`"]
    if not per_class:
        blocks.append(
            "_The export has no annotator instructions (they come with the official few-shot export)._ "
            f"Classes: {', '.join(f'`{c}`' for c in meta['classes'])}."
        )
    for name in meta["classes"] if per_class else []:
        blocks.append(f"#### `{name}`")
        entry = per_class.get(name)
        if entry is None:
            blocks.append("_No instructions for this class in the export._")
            continue
        for title, key in (("Description", "description"), ("Instructions", "instructions")):
            if entry.get(key):
                blocks += [f"*{title}*", entry[key].strip()]
    return "\n\n".join(blocks)


def card_body(configs: list[ConfigExport], card: Path, repo_id: str | None = None) -> str:
    """The markdown of the card: what RF100-VL is, how to load it, the datasets, the protocol."""
    rows = sorted(
        ((c, config_metadata(c, card, "rf100vl")) for c in configs),
        key=lambda row: (_domain_order(row[1]["domain"]), row[0].name),
    )
    repo = repo_id or REPO_PLACEHOLDER
    example = rows[0][0].name
    fewshot_split = rows[0][1]["fewshot"]["split"]
    semisup_split = rows[0][1]["semisup"]["split"]
    domains = ", ".join(DOMAINS)
    instructions = "\n\n".join(_instructions(c, m) for c, m in rows)
    return f"""# {PRETTY_NAME}

RF100-VL (Roboflow100-VL) is a benchmark of 100 object-detection datasets from Roboflow
Universe, chosen for concepts that vision-language models rarely see in pre-training. It
measures zero-shot, few-shot, semi-supervised and fully supervised detection, and each
dataset comes with the annotator instructions that defined its classes, so a model can be
prompted with the text a human annotator read. Its seven domains: {domains}.

This repository holds {len(rows)} of its datasets, one config each, as parquet shards built
with [rf100vl-hf](https://github.com/rf100vl-hf/rf100vl-hf) from the Roboflow COCO exports.
Configs outside the catalogue of 100 have domain `{CUSTOM_DOMAIN}`.

## Loading

```python
from datasets import load_dataset

ds = load_dataset("{repo}", "{example}", split="{fewshot_split}")

# Optional: classes, category ids, annotator instructions, licence, few-shot provenance.
from rf100vl_hf.metadata import read_metadata
meta = read_metadata(ds)
```

Splits: `train`, `validation` and `test` are the export's own; `{fewshot_split}` is the
few-shot training split (see the notes below); `{semisup_split}` is a seeded fraction of the
train images, drawn after sorting by file name.

Each row holds `image` (the export's original file bytes, never re-encoded), `image_id` (the
export's own id), `file_name`, `width` and `height` (the displayed frame, EXIF orientation
applied) and `objects`: `id`, `bbox` (COCO `[x, y, w, h]` in pixels, as exported), `category`
(a `ClassLabel`), `area`, `iscrowd`.

## Datasets

{_table(rows)}

Each licence is the source dataset's own, as its export states it; the benchmark and this
card are Apache-2.0.

## Protocol notes

- Score with pycocotools `COCOeval` (bbox) and `params.maxDets = [1, 10, 500]`; read AP50:95
  from `eval["precision"][:, :, :, 0, -1]` (area "all", 500 detections), mean over values
  above -1. `summarize()` hard-codes 100 detections for its headline AP.
- Category 0 of a raw Roboflow export is the dataset's supercategory, not a class: it is
  removed, and class indices follow the export's category ids (`category_ids` in the
  metadata).
- Annotation ids are renumbered from 1 within each split: pycocotools counts a match to
  an annotation whose id is 0 as a false positive.
- A few-shot split marked *official* is the train split of the official few-shot export.
  One marked *generated* was drawn from the full train split as the challenge tooling does:
  K = 10 instances per class (not images), seed 0, crowd boxes skipped. An image in it keeps
  only the boxes of the classes it was drawn for, so the split is federated: objects of
  other classes may be in an image without a box, and training or evaluating on it must not
  treat missing boxes as background.
- Class names are Roboflow's sanitised ones (`Raspberry Pi 3 B-` stands for B+).

## Annotator instructions

{instructions}

## Citation

```bibtex
{CITATION}
```
"""


def datasets_on_disk(data_dir: str | Path | None = None) -> list[str]:
    """The catalogue datasets found in the data folder, in catalogue order, then its custom exports."""
    root = Path(data_dir) if data_dir else paths.default_data_dir()
    found = []
    for entry in catalog.entries():
        try:
            locate(entry.basename, root)
        except DatasetNotFoundError:
            continue
        found.append(entry.basename)
    return found + custom_exports(root)


def export_rf100vl(
    names: list[str],
    out: Path,
    data_dir: str | Path | None = None,
    fewshot_dir: str | Path | None = None,
    *,
    repo_id: str | None = None,
) -> Path:
    """Build the Hub repository of the RF100-VL datasets ``names`` in ``out`` and return ``out``.

    Each dataset is prepared (see :func:`.builder.rf100vl_builder` for where it is looked
    for) and written as parquet; configs already in ``out`` and not named are kept. The
    whole repository is swapped in at the end, so an interrupted export changes nothing.
    ``repo_id`` only fills the loading example of the card.
    """
    if not names:
        raise ValueError("no RF100-VL dataset to export")
    out = Path(out)
    with staged_repository(out) as staging:
        configs = {config.name: config for config in read_card(staging)}
        for name in tqdm(list(dict.fromkeys(names)), desc="RF100-VL configs", unit="config"):
            builder = rf100vl_builder(name, data_dir, fewshot_dir)
            builder.download_and_prepare()
            configs[name] = write_config(builder, staging)
        ordered = list(configs.values())
        write_card(staging, ordered, card_data(ordered), card_body(ordered, out / CARD_FILE, repo_id))
    return out
