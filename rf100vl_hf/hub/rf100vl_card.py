"""The RF100-VL Hub repository: export configs and write its dataset card.

Everything the card says about a dataset comes from the config's metadata (carried in its
``description``, see :mod:`rf100vl_hf.metadata`), so a card can be rewritten for configs
exported earlier: :func:`export_rf100vl` into an existing folder rebuilds the named
configs, keeps the others and lists them all. The card's prose is the template
``templates/rf100vl_card.md``; its ``license`` is each dataset's own (see :func:`hub_license`).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from rf100vl_hf import catalog, paths
from rf100vl_hf.catalog import CUSTOM_DOMAIN, DOMAINS
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.hub.card import CARD_FILE, config_metadata, read_card, write_card
from rf100vl_hf.hub.export import ConfigExport, staged_repository, write_config
from rf100vl_hf.licences import hub_id
from rf100vl_hf.markdown import table
from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.rf100vl.builder import CITATION, rf100vl_builder
from rf100vl_hf.rf100vl.sources import custom_exports, locate

PRETTY_NAME = "RF100-VL"
REPO_PLACEHOLDER = "ORG/NAME"
_SOURCE_SPLITS = ("train", "validation", "test")
_SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))
NO_LICENSE = "see the source export"
"""The licence cell of a dataset whose export states none."""


def _size_category(configs: list[ConfigExport]) -> str:
    images = sum(s.num_rows for c in configs for s in c.splits if s.name in _SOURCE_SPLITS)
    return next((label for limit, label in _SIZE_CATEGORIES if images < limit), "n>1M")


def hub_license(text: str | None, homepage: str | None = None) -> tuple[str, str | None, str | None]:
    """``(license, license_name, license_link)`` of the Hub's card metadata for a licence as
    an export states it: a Hub id when there is one, else ``other`` with a name made of
    the text and the dataset's page as the link; ``unknown`` when nothing is stated."""
    if not text or not text.strip():
        return "unknown", None, None
    known = hub_id(text)
    if known:
        return known, None, None
    return "other", re.sub(r"[^a-z0-9.]+", "-", text.casefold()).strip("-.") or "other", homepage


def license_fields(metas: list[dict[str, Any]]) -> dict[str, Any]:
    """The card's ``license`` (one id, or the list of every config's), and ``license_name``
    and ``license_link`` when some licence is ``other``."""
    found = [hub_license(m.get("license"), m.get("homepage")) for m in metas]
    ids = sorted({i for i, _, _ in found})
    fields: dict[str, Any] = {"license": ids[0] if len(ids) == 1 else ids}
    names = sorted({n for i, n, _ in found if i == "other" and n})
    links = sorted({link for i, _, link in found if i == "other" and link})
    if names:
        fields["license_name"] = "-and-".join(names)
    if len(links) == 1:
        fields["license_link"] = links[0]
    return fields


def card_data(configs: list[ConfigExport], card: Path) -> dict[str, Any]:
    """The YAML fields of the card besides configs and dataset_info."""
    metas = [config_metadata(c, card, "rf100vl") for c in configs]
    return {
        **license_fields(metas),
        "task_categories": ["object-detection"],
        "pretty_name": PRETTY_NAME,
        "size_categories": [_size_category(configs)],
        "tags": ["rf100vl", "roboflow", "object-detection", "few-shot", "vision-language", "coco"],
    }


def _domain_order(domain: str) -> int:
    return DOMAINS.index(domain) if domain in DOMAINS else len(DOMAINS)


def _table(rows: list[tuple[ConfigExport, dict[str, Any]]]) -> str:
    split_names: list[str] = []
    for config, _ in rows:
        split_names += [s.name for s in config.splits if s.name not in split_names]
    header = ["dataset", "domain", "classes", *split_names, "few-shot split", "licence"]
    lines = []
    for config, meta in rows:
        counts = {s.name: str(s.num_rows) for s in config.splits}
        fewshot = meta["fewshot"]["source"] + (" (federated)" if meta["fewshot"].get("federated") else "")
        lines.append([
            f"`{config.name}`",
            meta["domain"],
            len(meta["classes"]),
            *(counts.get(name, "-") for name in split_names),
            fewshot,
            meta.get("license") or NO_LICENSE,
        ])
    return "\n".join(table(header, lines))


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


@cache
def _template() -> Template:
    return Template(resources.files("rf100vl_hf.hub").joinpath("templates/rf100vl_card.md").read_text("utf-8"))


def card_body(configs: list[ConfigExport], card: Path, repo_id: str | None = None) -> str:
    """The markdown of the card: what RF100-VL is, how to load it, the datasets, the protocol."""
    rows = sorted(
        ((c, config_metadata(c, card, "rf100vl")) for c in configs),
        key=lambda row: (_domain_order(row[1]["domain"]), row[0].name),
    )
    return _template().substitute(
        pretty_name=PRETTY_NAME,
        domains=", ".join(DOMAINS),
        count=len(rows),
        custom_domain=CUSTOM_DOMAIN,
        repo=repo_id or REPO_PLACEHOLDER,
        example=rows[0][0].name,
        fewshot_split=rows[0][1]["fewshot"]["split"],
        semisup_split=rows[0][1]["semisup"]["split"],
        table=_table(rows),
        instructions="\n\n".join(_instructions(c, m) for c, m in rows),
        citation=CITATION,
    )


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
        for name in progress_bar(list(dict.fromkeys(names)), desc="RF100-VL configs", unit="config"):
            builder = rf100vl_builder(name, data_dir, fewshot_dir)
            builder.download_and_prepare()
            configs[name] = write_config(builder, staging)
        ordered = list(configs.values())
        data = card_data(ordered, out / CARD_FILE)
        logger.info("RF100-VL card of %d configs, license %s", len(ordered), data["license"])
        write_card(staging, ordered, data, card_body(ordered, out / CARD_FILE, repo_id))
    return out
