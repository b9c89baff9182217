"""Find the export folders of a dataset: the catalogue's 100, the embedded sample, or any
other Roboflow export placed in the data folder (a "custom" config). Light (no numpy, no
Pillow), so that finding a prepared build by stat (:mod:`.build_record`) stays light.

A custom export's folder name becomes its config name, and so a folder name in datasets'
cache: a name that cannot be one (``:``, a line break...) is never dropped silently. The
export is left out of the list with an :class:`UnusableExportWarning`, and asking for it by
name is a :class:`~rf100vl_hf.errors.DataError` that says why.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from rf100vl_hf import catalog, paths
from rf100vl_hf.catalog import SAMPLE_NAME
from rf100vl_hf.errors import DataError, DatasetNotFoundError, unknown

ANNOTATIONS_FILE = "_annotations.coco.json"
SPLIT_FOLDERS: dict[str, str] = {"train": "train", "validation": "valid", "test": "test"}
"""Each split's folder in a Roboflow export (the reader reads ``<folder>/_annotations.coco.json``)."""
INVALID_CONFIG_CHARACTERS = '<>:/\\|?*'
"""Characters datasets refuses in a config name (it becomes a folder of the cache)."""


class UnusableExportWarning(UserWarning):
    """An export in the data folder cannot be a config (see :func:`config_name_problem`) and is left out."""


@dataclass(frozen=True)
class DatasetSource:
    name: str  # the config name
    root: Path  # the full export
    fewshot_root: Path | None  # the official few-shot export, when present
    domain: str
    in_rf20vl: bool = False


def present_splits(root: Path) -> list[str]:
    """The splits of an export folder that have an annotation file, in train/validation/test order.

    Anything by that name counts (a folder, a FIFO), so that reading it names what is wrong.
    """
    return [s for s, folder in SPLIT_FOLDERS.items() if (root / folder / ANNOTATIONS_FILE).exists()]


def _export_dir(root: Path, names: list[str]) -> Path | None:
    """The first of ``root/<name>`` that holds at least one split of a COCO export."""
    for name in names:
        if name and (root / name).is_dir() and present_splits(root / name):
            return root / name
    return None


def config_name_problem(name: str) -> str | None:
    """Why a folder name cannot be a config name (and so a cache folder name), or None.

    datasets refuses ``<>:/\\|?*``; control characters (a line break) and undecodable bytes
    (lone surrogates) would make names that no one can type or print back.
    """
    bad = sorted({c for c in name if c in INVALID_CONFIG_CHARACTERS or not c.isprintable()})
    if not bad:
        return None
    return f"{name!r} contains {', '.join(map(repr, bad))}, so it cannot be a config name; rename the folder"


def custom_exports(data_dir: str | Path) -> list[str]:
    """Folders of ``data_dir`` that are COCO exports but not catalogue datasets: each is a config.

    Hidden folders are skipped; an export whose folder name cannot be a config name is
    skipped with an :class:`UnusableExportWarning`.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        return []
    names = []
    for path in sorted(data_dir.iterdir()):
        name = path.name
        if name.startswith(".") or name == SAMPLE_NAME or catalog.contains(name) or not path.is_dir():
            continue
        if not present_splits(path):
            continue
        problem = config_name_problem(name)
        if problem:
            warnings.warn(f"{data_dir}: export left out: {problem}", UnusableExportWarning, stacklevel=2)
            continue
        names.append(name)
    return names


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
        from rf100vl_hf.sample import ensure_sample  # numpy and Pillow draw it: loaded for the sample alone

        root = _export_dir(data_dir, [SAMPLE_NAME]) or ensure_sample()
        return DatasetSource(SAMPLE_NAME, root, None, catalog.CUSTOM_DOMAIN)
    problem = config_name_problem(name)
    if problem and _export_dir(data_dir, [name]) is not None:
        raise DataError(data_dir, "folder name", problem)
    custom = custom_exports(data_dir)
    if name in custom:
        return DatasetSource(name, data_dir / name, _export_dir(fewshot_dir, [name]), catalog.CUSTOM_DOMAIN)
    known = [e.basename for e in catalog.entries()] + custom + [SAMPLE_NAME]
    raise unknown("dataset", name, known)
