"""Find the export folders of a dataset: the catalogue's 100, the embedded sample, or any
other Roboflow export placed in the data folder (a "custom" config)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.rf100vl import catalog
from rf100vl_hf.rf100vl.reader import present_splits

SAMPLE_NAME = "sample"


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


def custom_exports(data_dir: Path) -> list[str]:
    """Folders of ``data_dir`` that are COCO exports but not catalogue datasets."""
    if not data_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in data_dir.iterdir()
        if p.is_dir() and not catalog.contains(p.name) and p.name != SAMPLE_NAME and present_splits(p)
    )


def how_to_get(name: str, data_dir: Path) -> str:
    return (
        f"RF100-VL dataset {name!r} is not in {data_dir}.\n"
        "Get it in one of these ways:\n"
        f"  - download it with Roboflow's rf100vl package (needs a free Roboflow API key):\n"
        f"      pip install rf100vl && export ROBOFLOW_API_KEY=...\n"
        f"      python -c \"from rf100vl import download_rf100vl; download_rf100vl(path='{data_dir}')\"\n"
        f"    (and download_rf100vl_fsod for the official few-shot split and the annotator instructions);\n"
        f"  - point --data-dir or ${paths.DATA_DIR_ENV} at a folder that has {name}/train, valid and test;\n"
        f"  - or load a Hub mirror built with 'rf100vl-hf export' and 'rf100vl-hf push':\n"
        f"      load_dataset('<org>/rf100vl', '{name}', split='test')"
    )


def locate(name: str, data_dir: str | Path | None = None, fewshot_dir: str | Path | None = None) -> DatasetSource:
    """Where the exports of ``name`` are, or an error that says how to get them."""
    data_dir = Path(data_dir) if data_dir else paths.default_data_dir()
    fewshot_dir = Path(fewshot_dir) if fewshot_dir else paths.default_fewshot_dir()
    if name == SAMPLE_NAME and _export_dir(data_dir, [SAMPLE_NAME]) is None:
        from rf100vl_hf.sample import ensure_sample

        root = ensure_sample()
        return DatasetSource(SAMPLE_NAME, root, None, catalog.CUSTOM_DOMAIN)
    if catalog.contains(name):
        entry = catalog.get(name)
        root = _export_dir(data_dir, [entry.basename, entry.full_project])
        if root is None:
            raise DatasetNotFoundError(how_to_get(name, data_dir))
        fewshot_root = _export_dir(fewshot_dir, [entry.basename, entry.fewshot_project])
        return DatasetSource(name, root, fewshot_root, entry.domain, entry.in_rf20vl)
    root = _export_dir(data_dir, [name])
    if root is not None:
        return DatasetSource(name, root, _export_dir(fewshot_dir, [name]), catalog.CUSTOM_DOMAIN)
    known = [e.basename for e in catalog.entries()] + custom_exports(data_dir) + [SAMPLE_NAME]
    raise catalog.unknown("dataset", name, known)
