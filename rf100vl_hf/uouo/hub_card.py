"""The UOUO Hub repository: export the ``random`` and ``mmd`` configs and write the dataset card.

The card states the whole spec (this package's own: no official UOUO code or data is
public), the two prompts, the metrics and the paper's Table 1. What it says about each
config comes from the config's metadata (see :mod:`rf100vl_hf.metadata`), so configs
exported earlier into the same folder are kept and listed.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rf100vl_hf.hub.card import CARD_FILE, config_metadata, read_card, write_card
from rf100vl_hf.hub.export import ConfigExport, staged_repository, write_config
from rf100vl_hf.uouo import compose
from rf100vl_hf.uouo.builder import CITATION, HOMEPAGE, uouo_builder
from rf100vl_hf.uouo.embeddings import DEFAULT_MODEL, DEFAULT_PRETRAINED
from rf100vl_hf.uouo.mmd import DEFAULT_SIGMA, EXACT_LIMIT
from rf100vl_hf.uouo.plan import MODES
from rf100vl_hf.uouo.prompts import BOX_PROMPT, QUADRANT_PROMPT, QUADRANTS
from rf100vl_hf.uouo.sources import MIN_ALPHA_PIXELS, MIN_ALPHA_SIDE

PRETTY_NAME = "UOUO (rf100vl-hf rebuild)"
REPO_PLACEHOLDER = "ORG/uouo"


def card_data(configs: list[ConfigExport], license: str) -> dict[str, Any]:
    """The YAML fields of the card besides configs and dataset_info."""
    return {
        "license": license,
        "task_categories": ["visual-question-answering", "zero-shot-object-detection"],
        "pretty_name": PRETTY_NAME,
        "size_categories": ["n<1K" if sum(s.num_rows for c in configs for s in c.splits) < 1000 else "1K<n<10K"],
        "tags": ["uouo", "visual-grounding", "vision-language", "mosaic", "uncommon-objects"],
    }


def table1() -> str:
    """The paper's Table 1 (mIoU and quadrant accuracy on hard and random mosaics) as markdown."""
    text = (resources.files("rf100vl_hf") / "rf100vl" / "data" / "uouo_table1.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(text.splitlines()))
    lines = ["| model | mIoU (mmd) | mIoU (random) | accuracy (mmd) | accuracy (random) |", "|---|---|---|---|---|"]
    for row in rows:
        cells = [row["model"], row["mIoU_mmd"], row["mIoU_rand"], row["acc_mmd"], row["acc_rand"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _configs_table(rows: list[tuple[ConfigExport, dict[str, Any]]]) -> str:
    lines = ["| config | mosaics | categories | cut-outs | source | CLIP model | sigma | route | seed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for config, meta in rows:
        clip = f"{meta['clip']['model']} ({meta['clip']['pretrained'] or 'random init'})"
        cells = [f"`{config.name}`", str(sum(s.num_rows for s in config.splits)), str(len(meta["categories"])),
                 str(meta["source"]["images"]), f"{meta['source']['name']} `{meta['source']['fingerprint'][:12]}`",
                 clip, str(meta["mmd"]["sigma"]), meta["mmd"]["route"], str(meta["seed"])]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def spec_text() -> str:
    """The UOUO spec as markdown: shared by the card and the project's README."""
    quadrants = ", ".join(f"`{q}`" for q in QUADRANTS)
    return f"""\
Each example is one {compose.CANVAS}x{compose.CANVAS} mosaic on a plain background (RGB
{compose.BACKGROUND}), split into four {compose.CELL}x{compose.CELL} cells: {quadrants}.

- **Source.** Categories of uncommon objects, several background-removed images each (RGBA,
  or an image plus a `<stem>.mask.png` mask). An object is every pixel with alpha above 0;
  its alpha box must be at least {MIN_ALPHA_SIDE}x{MIN_ALPHA_SIDE} px with at least
  {MIN_ALPHA_PIXELS} such pixels.
- **Choosing the four categories.** `random`: four distinct categories drawn uniformly;
  the first is the *anchor*. `mmd` (hard): an anchor drawn uniformly, and the three
  categories closest to it by MMD. The anchor is the target of both questions; the four
  are shuffled over the cells, and each cell gets one of its category's images drawn
  uniformly.
- **MMD.** Over CLIP image embeddings (open_clip, default `{DEFAULT_MODEL}` with
  `{DEFAULT_PRETRAINED}`, unit norm; each cut-out cropped to its alpha box, centred on a
  square of the background colour and embedded as such), with the Gaussian RBF kernel
  `k(a, b) = exp(-||a - b||^2 / (2 sigma^2))`, sigma = {DEFAULT_SIGMA:g} by default:
  `MMD^2(X, Y) = mean k(x, x') + mean k(y, y') - 2 mean k(x, y)`, the biased estimator
  (all pairs, diagonal included). Up to {EXACT_LIMIT:,} categories it is computed exactly for all
  pairs; above, nearest categories come from the mean embeddings
  (`MMD^2 ~ ||mean(X) - mean(Y)||^2 / sigma^2`, accurate to about 1% at sigma = 10 for
  unit-norm embeddings). Every mosaic records the exact MMD^2 of each object's category to
  the anchor (`objects.mmd2_to_anchor`, 0 for the anchor), for `random` mosaics too.
- **Augmentation.** Each object is cropped to its alpha box, scaled to a uniform
  {compose.SCALE_RANGE[0]}-{compose.SCALE_RANGE[1]} of the largest size that fits its cell
  (Lanczos, premultiplied alpha), flipped left-right with probability
  {compose.FLIP_PROBABILITY}, placed uniformly at random where it fits inside its cell, and
  alpha-composited. Scale, flip, offset and size are recorded per object.
- **Ground truth.** The tight box of the object's pasted alpha, after the transform, as
  `[x_min, y_min, x_max, y_max]` in pixels with exclusive ends (`box`), and divided by
  {compose.CANVAS} (`box_norm`); its quadrant is its cell.
- **Determinism.** Mosaic `i` is drawn from `numpy.random.default_rng([seed, i])` and
  encoded as PNG with fixed settings: the same source, CLIP weights and seed rebuild the
  same bytes.

Prompts (the same target for both):

- box: `{BOX_PROMPT}`
- quadrant: `{QUADRANT_PROMPT}`

Metrics: **quadrant accuracy** (a model that answers only with a box answers the quadrant
of the box centre) and **mIoU** of the predicted box against `target_box`. A missing or
unparseable answer scores IoU 0 and a wrong quadrant, and is counted as a parse failure."""


def card_body(configs: list[ConfigExport], card: Path, repo_id: str | None = None) -> str:
    """The markdown of the card."""
    rows = sorted(((c, config_metadata(c, card, "uouo")) for c in configs), key=lambda row: row[0].name)
    repo = repo_id or REPO_PLACEHOLDER
    example = "mmd" if any(c.name == "mmd" for c, _ in rows) else rows[0][0].name
    return f"""# UOUO: Uncontextualized Uncommon Objects

UOUO asks a vision-language model two questions about one object in a mosaic of four
uncommon objects: *where is it* (a box) and *which quadrant is it in*. Its hard mosaics
put the object beside the categories that look most like it ([paper]({HOMEPAGE})).
This repository is a rebuild with [rf100vl-hf](https://github.com/rf100vl-hf/rf100vl-hf),
which uses no official UOUO code or data (none was reachable when it was written): the
spec below is rf100vl-hf's reading of the paper, fixed and documented here, and the
images come from the source named in the table, under its licence.

## Loading

```python
from datasets import load_dataset

ds = load_dataset("{repo}", "{example}", split="test")
row = ds[0]
row["box_prompt"], row["target_box"], row["quadrant_prompt"], row["target_quadrant"]

from rf100vl_hf.metadata import read_metadata
meta = read_metadata(ds)  # source fingerprint, CLIP model, sigma, seed, categories, prompts
```

## Configs

{_configs_table(rows)}

Fields: `image` (PNG), `mosaic_id`, `objects` (per cell in the order top-left, top-right,
bottom-left, bottom-right: `category`, `box`, `box_norm`, `quadrant`, `source_id` (path in
the source), `source_box` (alpha box in the source image), `scale`, `flip`, `offset`,
`size`, `mmd2_to_anchor`), `target_index`, `target_category`, `target_quadrant`,
`target_box`, `target_box_norm`, `box_prompt`, `quadrant_prompt`.

## Spec

{spec_text()}

## The paper's results (Table 1)

On the paper's own UOUO data (25,864 categories), not on this repository:

{table1()}

## Citation

```bibtex
{CITATION}
```
"""


def export_uouo(
    out: str | Path,
    source_dir: str | Path | None = None,
    configs: tuple[str, ...] = MODES,
    *,
    repo_id: str | None = None,
    license: str = "other",
    clip_model: str = DEFAULT_MODEL,
    clip_pretrained: str | None = DEFAULT_PRETRAINED,
    device: str | None = None,
    max_shard_bytes: int = 500_000_000,
    **parameters: Any,
) -> Path:
    """Build the UOUO Hub repository in ``out`` and return ``out``.

    Each config is prepared (:func:`.builder.uouo_builder`; ``parameters`` are
    ``num_mosaics``, ``seed``, ``sigma``, ``route``) and written as parquet; configs already
    in ``out`` and not named are kept. ``license`` should be the source images' licence (a
    Hub licence id). The repository is swapped in only when everything succeeded.
    """
    if not configs:
        raise ValueError("no UOUO config to export")
    out = Path(out)
    with staged_repository(out) as staging:
        written = {config.name: config for config in read_card(staging)}
        for name in tqdm(list(dict.fromkeys(configs)), desc="UOUO configs", unit="config"):
            builder = uouo_builder(name, source_dir, clip_model=clip_model, clip_pretrained=clip_pretrained,
                                   device=device, **parameters)
            builder.download_and_prepare()
            written[name] = write_config(builder, staging, max_shard_bytes=max_shard_bytes)
        ordered = list(written.values())
        write_card(staging, ordered, card_data(ordered, license), card_body(ordered, out / CARD_FILE, repo_id))
    return out
