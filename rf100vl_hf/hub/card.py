"""The dataset card (README.md) of a Hub dataset repository, and reading it back.

``load_dataset`` learns a parquet repository's configs from the card's YAML: ``configs``
lists each config's ``data_files`` per split, and ``dataset_info`` each config's features
and splits. Each ``dataset_info`` entry also carries the config's ``description``, which
``DatasetInfo._from_yaml_dict`` keeps: it holds this package's metadata JSON (see
:mod:`rf100vl_hf.metadata`), so ``read_metadata`` works on a dataset loaded from the Hub.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

from datasets.info import DatasetInfosDict
from huggingface_hub import DatasetCard, DatasetCardData

from rf100vl_hf.controls import visible
from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.eval_yaml import eval_yaml_for, write_eval_yaml
from rf100vl_hf.hub.export import ConfigExport, SplitExport, umask_mode

CARD_FILE = "README.md"
LOADING_EXAMPLE = re.compile(r'^(ds = load_dataset\(")[^"\n]*(")', re.MULTILINE)
"""The loading example of both benchmarks' cards, ``ds = load_dataset("ORG/NAME", ...)``:
:func:`name_repository` sets the repository it names."""


def _dataset_info_entry(config: ConfigExport) -> dict[str, Any]:
    # The YAML form ``datasets`` itself writes (``DatasetInfosDict.to_dataset_card_data``),
    # plus the description, which it leaves out but reads back.
    entry = {"config_name": config.name, "description": config.description}
    entry.update({k: v for k, v in config.info()._to_yaml_dict().items() if k != "config_name"})
    return entry


def card_yaml(configs: list[ConfigExport], extra: dict[str, Any]) -> DatasetCardData:
    """The card's YAML: ``extra`` (license, task_categories, pretty_name, tags...) plus the configs."""
    reserved = {"configs", "dataset_info"} & set(extra)
    if reserved:
        raise ValueError(f"card_data may not set {sorted(reserved)}: they are written from the configs")
    ordered = sorted(configs, key=lambda c: c.name)
    return DatasetCardData(
        **extra,
        configs=[
            {"config_name": c.name, "data_files": [{"split": s.name, "path": s.pattern} for s in c.splits]}
            for c in ordered
        ],
        dataset_info=[_dataset_info_entry(c) for c in ordered],
    )


def write_card(out: Path, configs: list[ConfigExport], card_data: dict[str, Any], body: str) -> Path:
    """Write ``out/README.md`` (YAML header and markdown ``body``) atomically and return its path.

    A repository of RF100-VL or UOUO configs also gets its ``eval.yaml``, which declares the
    benchmark's tasks to the Hub (see :mod:`.eval_yaml`). Control characters in ``body``
    (text from metadata read back from an earlier card) are written as their escapes; the YAML
    writer escapes those of the header itself.
    """
    out = Path(out)
    if not configs:
        raise ValueError("a dataset card needs at least one config")
    data = card_yaml(configs, card_data)
    card = DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{visible(body.strip(), multiline=True)}\n")
    out.mkdir(parents=True, exist_ok=True)
    path = _replace_card(out, str(card))
    evaluation = eval_yaml_for(configs)
    if evaluation is not None:
        write_eval_yaml(out, evaluation)
    return path


def _replace_card(out: Path, text: str) -> Path:
    """Write ``out/README.md`` aside and rename it into place, so a reader never sees half a card."""
    handle, tmp = tempfile.mkstemp(prefix=".README-", suffix=".md", dir=out)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as file:
            file.write(text)
        os.chmod(tmp, umask_mode(directory=False))  # mkstemp makes it private
        os.replace(tmp, out / CARD_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out / CARD_FILE


def name_repository(out: Path, repo_id: str) -> bool:
    """Make the loading examples of ``out/README.md`` name ``repo_id``, the repository it is
    pushed to (an export written before its repository was known says ``ORG/NAME``); whether
    the card changed."""
    with (Path(out) / CARD_FILE).open(encoding="utf-8", newline="") as file:
        text = file.read()
    named = LOADING_EXAMPLE.sub(lambda match: f"{match[1]}{repo_id}{match[2]}", text)
    if named == text:
        return False
    _replace_card(Path(out), named)
    return True


class StaleConfigWarning(UserWarning):
    """A config listed by an existing card lost shards, so a re-export no longer lists it."""


def _split_export(out: Path, card: Path, name: str, item: Any, info: Any) -> SplitExport | None:
    """One ``data_files`` item of a card as written by :func:`write_card`; None when its shards are gone."""
    if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not isinstance(item.get("split"), str):
        raise DataError(card, f"configs[{name}].data_files", f"expected {{split, path}} with one glob, found {item!r}")
    split_info = (info.splits or {}).get(item["split"])
    if split_info is None:
        raise DataError(card, f"dataset_info[{name}].splits", f"no entry for split {item['split']!r}")
    files = tuple(sorted(p.relative_to(out).as_posix() for p in out.glob(item["path"])))
    return SplitExport(item["split"], split_info.num_examples, split_info.num_bytes, files) if files else None


def read_card(out: Path) -> list[ConfigExport]:
    """The configs an existing card lists (none without a card).

    A re-export into the same folder starts from these, so configs it does not rebuild stay
    listed. A config whose shards are missing is left out, with a :class:`StaleConfigWarning`.
    """
    out = Path(out)
    card = out / CARD_FILE
    if not card.is_file():
        return []
    data = DatasetCard.load(card).data
    infos = DatasetInfosDict.from_dataset_card_data(data)
    configs = []
    for entry in _as_list(data.get("configs")):
        name = entry.get("config_name") if isinstance(entry, dict) else None
        if name not in infos or not isinstance(entry.get("data_files"), list):
            raise DataError(card, f"configs[{name}]", "no data_files list or no dataset_info entry")
        info = infos[name]
        found = [_split_export(out, card, name, item, info) for item in entry["data_files"]]
        splits = tuple(split for split in found if split is not None)
        if len(splits) < len(found):
            warnings.warn(f"{card}: config {name!r} has lost shards and is left out", StaleConfigWarning, stacklevel=2)
            continue
        download_size = sum((out / f).stat().st_size for s in splits for f in s.files)
        configs.append(ConfigExport(name, info.features, info.description or "", splits, download_size))
    return configs


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def config_metadata(config: ConfigExport, card: Path, benchmark: str) -> dict[str, Any]:
    """A config's metadata (see :mod:`rf100vl_hf.metadata`), which must be of ``benchmark``:
    anything else in a repository is an error naming the card and config, not a silent row."""
    from rf100vl_hf.metadata import read_metadata

    field = f"dataset_info[{config.name}].description"
    try:
        metadata = read_metadata(config.info())
    except ValueError as exc:
        raise DataError(card, field, str(exc)) from None
    if metadata.get("benchmark") != benchmark:
        raise DataError(card, field, f"not a {benchmark} config")
    return metadata
