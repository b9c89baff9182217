"""Find the export folders of a dataset: the catalogue's 100, the embedded sample, or any
other Roboflow export placed in the data folder (a "custom" config)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.rf100vl import catalog
from rf100vl_hf.rf100vl.reader import ANNOTATIONS_FILE, present_splits
from rf100vl_hf.sample import ensure_sample

SAMPLE_NAME = "sample"
INVALID_CONFIG_CHARACTERS = '<>:/\\|?*'
"""Characters datasets refuses in a config name (it becomes a folder of the cache)."""


@dataclass(frozen=True)
class DatasetSource:
    name: str  # the config name
    root: Path  # the full export
    fewshot_root: Path | None  # the official few-shot export, when present
    domain: str
    in_rf20vl: bool = False


def _export_dir(root: Path, names: list[str]) -> Path | None:
    """The first of ``root/<name>`` that holds at least one split of a COCO export."""
    for name in names:
        if name and (root / name).is_dir() and present_splits(root / name):
            return root / name
    return None


def _is_config_name(name: str) -> bool:
    """Whether a folder name can be a datasets config name (and so a cache folder name)."""
    return bool(name) and not name.startswith(".") and not any(c in name for c in INVALID_CONFIG_CHARACTERS)


def custom_exports(data_dir: str | Path) -> list[str]:
    """Folders of ``data_dir`` that are COCO exports but not catalogue datasets: each is a config."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in data_dir.iterdir()
        if p.is_dir()
        and _is_config_name(p.name)
        and not catalog.contains(p.name)
        and p.name != SAMPLE_NAME
        and present_splits(p)
    )


def how_to_get(name: str, data_dir: Path, fewshot_dir: Path) -> str:
    """The message of a missing catalogue dataset: where it was looked for and three ways to get it."""
    return (
        f"RF100-VL dataset {name!r} is not in {data_dir} (no {name}/train, valid or test with {ANNOTATIONS_FILE}).\n"
        "Get it in one of these ways:\n"
        "  - download the exports with Roboflow's rf100vl package (needs a free Roboflow API key):\n"
        "      pip install rf100vl && export ROBOFLOW_API_KEY=...\n"
        f"      python -c \"from rf100vl import download_rf100vl; download_rf100vl(path='{data_dir}')\"\n"
        "    and, for the official few-shot split and the annotator instructions,\n"
        f"      download_rf100vl_fsod(path='{fewshot_dir}');\n"
        f"  - or point data_dir (--data-dir) or ${paths.DATA_DIR_ENV} at a folder that has {name}/ in it;\n"
        f"  - or load a Hub mirror of the prepared datasets: load_dataset('<org>/<repo>', '{name}', split='test')."
    )


def locate(name: str, data_dir: str | Path | None = None, fewshot_dir: str | Path | None = None) -> DatasetSource:
    """Where the exports of ``name`` are, or an error that says how to get them.

    ``sample`` is the embedded sample (written on first use) unless the data folder has one.
    """
    data_dir = Path(data_dir) if data_dir else paths.default_data_dir()
    fewshot_dir = Path(fewshot_dir) if fewshot_dir else paths.default_fewshot_dir()
    if catalog.contains(name):
        entry = catalog.get(name)
        root = _export_dir(data_dir, [entry.basename, entry.full_project])
        if root is None:
            raise DatasetNotFoundError(how_to_get(name, data_dir, fewshot_dir))
        fewshot_root = _export_dir(fewshot_dir, [entry.basename, entry.fewshot_project])
        return DatasetSource(name, root, fewshot_root, entry.domain, entry.in_rf20vl)
    if name == SAMPLE_NAME:
        root = _export_dir(data_dir, [SAMPLE_NAME]) or ensure_sample()
        return DatasetSource(SAMPLE_NAME, root, None, catalog.CUSTOM_DOMAIN)
    custom = custom_exports(data_dir)
    if name in custom:
        return DatasetSource(name, data_dir / name, _export_dir(fewshot_dir, [name]), catalog.CUSTOM_DOMAIN)
    known = [e.basename for e in catalog.entries()] + custom + [SAMPLE_NAME]
    raise catalog.unknown("dataset", name, known)
