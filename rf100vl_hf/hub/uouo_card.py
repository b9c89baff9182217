"""The UOUO Hub repository: export the ``random`` and ``mmd`` configs and write the dataset card.

The card states the whole spec (this package's own: no official UOUO code or data is
public), the two prompts, the metrics and the paper's Table 1. Its prose lives in
``templates/uouo_card.md`` and ``templates/uouo_spec.md`` (``string.Template`` placeholders); what it
says about each config comes from the config's metadata (see :mod:`rf100vl_hf.metadata`),
so configs exported earlier into the same folder are kept and listed. The licence is the
source's own (:mod:`.licence`), never a fixed value: ``unknown`` with a note when the
source does not state one.
"""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from rf100vl_hf.hub.card import CARD_FILE, config_metadata, read_card, write_card
from rf100vl_hf.hub.export import ConfigExport, staged_repository, write_config
from rf100vl_hf.markdown import table
from rf100vl_hf.progress import progress_bar
from rf100vl_hf.uouo import compose
from rf100vl_hf.uouo.builder import CITATION, HOMEPAGE, uouo_builder
from rf100vl_hf.uouo.defaults import (
    AGREEMENT_SAMPLE,
    DEFAULT_ALPHA_THRESHOLD,
    DEFAULT_CLIP_MODEL,
    DEFAULT_CLIP_PRETRAINED,
    DEFAULT_SIGMA,
    EXACT_LIMIT,
    MIN_AGREEMENT,
    MODES,
)
from rf100vl_hf.uouo.licence import UNKNOWN
from rf100vl_hf.uouo.prompts import BOX_PROMPT, QUADRANT_PROMPT, QUADRANTS
from rf100vl_hf.uouo.sources import MIN_ALPHA_PIXELS, MIN_ALPHA_SIDE

PRETTY_NAME = "UOUO (rf100vl-hf rebuild)"
REPO_PLACEHOLDER = "ORG/uouo"
MIXED = "other"


def _template(name: str) -> Template:
    return Template((resources.files("rf100vl_hf.hub") / "templates" / f"uouo_{name}").read_text(encoding="utf-8"))


def _source_licences(rows: list[tuple[ConfigExport, dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """Each source's licence (by source name), as the configs' metadata records it."""
    return {meta["source"]["name"]: meta["source"].get("license") or {"id": UNKNOWN, "name": "", "origin": ""}
            for _, meta in rows}


def card_licence(rows: list[tuple[ConfigExport, dict[str, Any]]], stated: str | None) -> tuple[dict[str, Any], str]:
    """The card's YAML licence fields and the paragraph that explains them.

    ``stated`` (a Hub licence id given by whoever exports) wins; otherwise the sources'
    licences decide: one shared licence is the card's, several different ones are ``other``. A
    source's note (a restriction such as a non-commercial remover's) is repeated either way."""
    licences = _source_licences(rows)
    fields, text = _card_licence(licences, stated)
    notes = [f"`{name}`: {lic['note']}" for name, lic in sorted(licences.items()) if lic.get("note")]
    return fields, text + (f" Restrictions stated by the source: {'; '.join(notes)}." if notes else "")


def _card_licence(licences: dict[str, dict[str, str]], stated: str | None) -> tuple[dict[str, Any], str]:
    if stated:
        return {"license": stated}, f"`{stated}`, as stated when this repository was exported."
    ids = {lic["id"] for lic in licences.values()}
    described = "; ".join(
        f"`{name}`: " + (f"`{lic['id']}`" if lic["id"] not in (UNKNOWN, MIXED) else lic["id"])
        + (f" ({lic['name']}" + (f", from its `{lic['origin']}`" if lic["origin"] else "") + ")" if lic["name"] else "")
        for name, lic in sorted(licences.items())
    )
    if ids == {UNKNOWN}:
        return {"license": UNKNOWN}, (
            f"Unknown: the source states no licence ({described}; no manifest `license`, licence file or "
            "README licence line was found). Check the source's terms before you redistribute the images."
        )
    if len(ids) == 1 and MIXED not in ids:
        return {"license": ids.pop()}, f"The mosaics are derived from the source images and keep their licence: {described}."
    names = sorted({lic["name"] or lic["id"] for lic in licences.values()})
    return {"license": MIXED, "license_name": ", ".join(names)}, (
        f"The mosaics keep the licences of their source images, which are not one Hub licence id: {described}."
    )


def card_data(configs: list[ConfigExport], licence_fields: dict[str, Any]) -> dict[str, Any]:
    """The YAML fields of the card besides configs and dataset_info."""
    return {
        **licence_fields,
        "task_categories": ["visual-question-answering", "zero-shot-object-detection"],
        "pretty_name": PRETTY_NAME,
        "size_categories": ["n<1K" if sum(s.num_rows for c in configs for s in c.splits) < 1000 else "1K<n<10K"],
        "tags": ["uouo", "visual-grounding", "vision-language", "mosaic", "uncommon-objects"],
    }


def table1() -> str:
    """The paper's Table 1 (mIoU and quadrant accuracy on hard and random mosaics) as markdown."""
    text = (resources.files("rf100vl_hf") / "data" / "uouo_table1.csv").read_text(encoding="utf-8")
    rows = [[r["model"], r["mIoU_mmd"], r["mIoU_rand"], r["acc_mmd"], r["acc_rand"]]
            for r in csv.DictReader(text.splitlines())]
    header = ["model", "mIoU (mmd)", "mIoU (random)", "accuracy (mmd)", "accuracy (random)"]
    return "\n".join(table(header, rows, numeric=range(1, 5)))


def _configs_table(rows: list[tuple[ConfigExport, dict[str, Any]]]) -> str:
    header = ["config", "mosaics", "categories", "cut-outs", "source", "licence", "CLIP model", "sigma", "route",
              "seed"]
    lines = []
    for config, meta in rows:
        source, mmd = meta["source"], meta["mmd"]
        route = mmd["route"]
        if mmd.get("agreement") is not None:
            route += f" (agreement {mmd['agreement']:.0%})"
        lines.append([
            f"`{config.name}`", sum(s.num_rows for s in config.splits), len(meta["categories"]), source["images"],
            f"{source['name']} `{source['fingerprint'][:12]}`", (source.get("license") or {}).get("id", UNKNOWN),
            f"{meta['clip']['model']} ({meta['clip']['pretrained'] or 'random init'})", mmd["sigma"], route,
            meta["seed"],
        ])
    return "\n".join(table(header, lines, numeric=(1, 2, 3, 7, 9)))


def spec_text() -> str:
    """The UOUO spec as markdown: the card's, and the one ``docs/uouo.md`` explains."""
    return _template("spec.md").substitute(
        canvas=compose.CANVAS, cell=compose.CELL, background=compose.BACKGROUND,
        quadrants=", ".join(f"`{q}`" for q in QUADRANTS), alpha_threshold=DEFAULT_ALPHA_THRESHOLD,
        min_side=MIN_ALPHA_SIDE, min_pixels=MIN_ALPHA_PIXELS, clip_model=DEFAULT_CLIP_MODEL,
        clip_pretrained=DEFAULT_CLIP_PRETRAINED, sigma=f"{DEFAULT_SIGMA:g}", exact_limit=f"{EXACT_LIMIT:,}",
        agreement_sample=AGREEMENT_SAMPLE, min_agreement=f"{MIN_AGREEMENT:.0%}", scale_low=compose.SCALE_RANGE[0],
        scale_high=compose.SCALE_RANGE[1], flip=compose.FLIP_PROBABILITY, box_prompt=BOX_PROMPT,
        quadrant_prompt=QUADRANT_PROMPT,
    ).strip()


def _rows(configs: list[ConfigExport], card: Path) -> list[tuple[ConfigExport, dict[str, Any]]]:
    return sorted(((c, config_metadata(c, card, "uouo")) for c in configs), key=lambda row: row[0].name)


def card_body(configs: list[ConfigExport], card: Path, repo_id: str | None = None, license: str | None = None) -> str:
    """The markdown of the card."""
    rows = _rows(configs, card)
    example = "mmd" if any(c.name == "mmd" for c, _ in rows) else rows[0][0].name
    return _template("card.md").substitute(
        homepage=HOMEPAGE, licence=card_licence(rows, license)[1], repo=repo_id or REPO_PLACEHOLDER,
        example=example, configs=_configs_table(rows), spec=spec_text(), table1=table1(), citation=CITATION,
    )


def export_uouo(
    out: str | Path,
    source_dir: str | Path | None = None,
    configs: tuple[str, ...] = MODES,
    *,
    repo_id: str | None = None,
    license: str | None = None,
    clip_model: str = DEFAULT_CLIP_MODEL,
    clip_pretrained: str | None = DEFAULT_CLIP_PRETRAINED,
    device: str | None = None,
    max_shard_bytes: int = 500_000_000,
    **parameters: Any,
) -> Path:
    """Build the UOUO Hub repository in ``out`` and return ``out``.

    Each config is prepared (:func:`.builder.uouo_builder`; ``parameters`` are
    ``num_mosaics``, ``seed``, ``sigma``, ``route``, ``alpha_threshold``, ``num_proc``) and
    written as parquet; configs already in ``out`` and not named are kept. The card's licence
    is the source's (:mod:`.licence`) unless ``license`` (a Hub licence id) states it. The
    repository is swapped in only when everything succeeded.
    """
    if not configs:
        raise ValueError("no UOUO config to export")
    out = Path(out)
    with staged_repository(out) as staging:
        written = {config.name: config for config in read_card(staging)}
        for name in progress_bar(list(dict.fromkeys(configs)), desc="UOUO configs", unit="config"):
            builder = uouo_builder(name, source_dir, clip_model=clip_model, clip_pretrained=clip_pretrained,
                                   device=device, **parameters)
            builder.download_and_prepare()
            written[name] = write_config(builder, staging, max_shard_bytes=max_shard_bytes)
        ordered = list(written.values())
        fields, _ = card_licence(_rows(ordered, out / CARD_FILE), license)
        write_card(staging, ordered, card_data(ordered, fields), card_body(ordered, out / CARD_FILE, repo_id, license))
    return out
