"""Write prepared ``datasets`` builders as a Hub dataset repository: parquet shards per config.

A Hub dataset is a folder of parquet shards plus a README whose YAML lists each config's
files and info (see :mod:`.card`). This module writes the shards the way
``Dataset.push_to_hub`` does (same shard naming, same row-group sizing, external files
embedded as bytes), but into a local folder, so that the repository can be checked with
``load_dataset(folder, config)`` before anything is pushed. Nothing here knows which
benchmark it writes.

Writes never leave a half-written repository: a config is written into a staging folder
and swapped in with renames, and :func:`staged_repository` does the same for a whole
repository (the shards of every config and the card), so an interrupted export leaves the
previous repository as it was. A staging folder names the process that made it; one left by
a process that no longer runs (a killed export) is removed by the next export. Folders and
files get the modes the umask gives (not the private modes of temporary files).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import datasets
from datasets.arrow_writer import get_writer_batch_size_from_data_size, get_writer_batch_size_from_features
from datasets.features.features import require_decoding
from datasets.table import embed_table_storage

from rf100vl_hf.progress import progress_bar

STAGING_PREFIX = ".staging-"
"""Names of the temporary folders an export writes before swapping them in; a push skips them."""


@dataclass(frozen=True)
class SplitExport:
    """One split of a written config: what the card's ``dataset_info`` and ``configs`` need."""

    name: str
    num_rows: int
    num_bytes: int  # Arrow size, the figure ``datasets`` reports for a split
    files: tuple[str, ...]  # repository-relative paths of its shards, in order

    @property
    def pattern(self) -> str:
        """The ``data_files`` glob of the split, as ``push_to_hub`` writes it (``<config>/<split>-*``)."""
        return f"{self.files[0].rsplit('/', 1)[0]}/{self.name}-*"


@dataclass(frozen=True)
class ConfigExport:
    """A config written to a repository folder."""

    name: str
    features: datasets.Features
    description: str
    splits: tuple[SplitExport, ...]
    download_size: int  # bytes of parquet on disk

    @property
    def dataset_size(self) -> int:
        return sum(split.num_bytes for split in self.splits)

    def info(self) -> datasets.DatasetInfo:
        """The ``DatasetInfo`` that ``load_dataset`` rebuilds from the card for this config."""
        splits = datasets.SplitDict()
        for split in self.splits:
            splits.add(datasets.SplitInfo(name=split.name, num_bytes=split.num_bytes, num_examples=split.num_rows))
        return datasets.DatasetInfo(
            description=self.description,
            features=self.features,
            config_name=self.name,
            splits=splits,
            download_size=self.download_size,
            dataset_size=self.dataset_size,
        )


def umask_mode(directory: bool) -> int:
    """The mode a new folder (0o777) or file (0o666) gets under the current umask."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def clean_stale_staging(parent: Path, prefix: str) -> None:
    """Remove the staging folders ``<prefix><pid>-*`` in ``parent`` whose process is gone."""
    pattern = re.compile(rf"{re.escape(prefix)}(\d+)-[^/]+")
    for path in parent.glob(f"{prefix}*") if parent.is_dir() else ():
        match = pattern.fullmatch(path.name)
        if match and path.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def staging_dir(parent: Path, prefix: str) -> Path:
    """A new staging folder ``<prefix><pid>-XXXX`` in ``parent`` with the umask's mode, after
    removing those that killed processes left behind."""
    clean_stale_staging(parent, prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    path.chmod(umask_mode(directory=True))
    return path


def _swap_in(staging: Path, target: Path) -> None:
    """Put ``staging`` where ``target`` is, replacing it with two renames (never a partial folder)."""
    old = None
    if target.exists():
        old = staging_dir(target.parent, STAGING_PREFIX + "old-")
        os.replace(target, old / target.name)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _num_shards(num_rows: int, num_bytes: int, max_shard_bytes: int) -> int:
    return max(1, min(math.ceil(num_bytes / max_shard_bytes), num_rows))


def _write_split(dataset: datasets.Dataset, folder: Path, split: str, max_shard_bytes: int) -> list[Path]:
    """Write one split as ``<split>-NNNNN-of-NNNNN.parquet`` shards, as ``push_to_hub`` does."""
    # The estimate counts the bytes of external files too, so shards of path-only images are sized right.
    nbytes = dataset._estimate_nbytes()
    batch_size = get_writer_batch_size_from_features(dataset.features) or get_writer_batch_size_from_data_size(
        len(dataset), nbytes
    )
    embed = any(require_decoding(f, ignore_decode_attribute=True) for f in dataset.features.values())
    count = _num_shards(len(dataset), nbytes, max_shard_bytes)
    paths = []
    for index in range(count):
        shard = dataset.shard(num_shards=count, index=index, contiguous=True)
        if embed:  # files referenced by path become bytes; bytes already there are kept as they are
            shard = shard.with_format("arrow").map(
                embed_table_storage, batched=True, batch_size=batch_size, keep_in_memory=True
            )
        path = folder / f"{split}-{index:05d}-of-{count:05d}.parquet"
        shard.to_parquet(str(path), batch_size=batch_size)
        paths.append(path)
    return paths


def write_config(builder: datasets.DatasetBuilder, out: Path, max_shard_bytes: int = 500_000_000) -> ConfigExport:
    """Write every split of a prepared ``builder`` under ``out/<config>/`` and say what was written.

    ``download_and_prepare`` must have run. The config's previous folder, if any, is replaced
    whole, so shards of an older export (a different shard count) never linger.
    """
    out = Path(out)
    info = builder.info
    if not info.splits:
        raise ValueError(f"builder {builder.name}/{builder.config.name} is not prepared: run download_and_prepare() first")
    name = builder.config.name
    out.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(out, f"{STAGING_PREFIX}{name}-")
    try:
        splits = []
        for split in progress_bar(list(info.splits), desc=f"{name}: parquet", unit="split"):
            dataset = builder.as_dataset(split=split)
            assert isinstance(dataset, datasets.Dataset)
            paths = _write_split(dataset, staging, split, max_shard_bytes)
            files = tuple(f"{name}/{p.name}" for p in paths)
            splits.append(SplitExport(split, len(dataset), info.splits[split].num_bytes, files))
        download_size = sum(p.stat().st_size for p in staging.iterdir())
        _swap_in(staging, out / name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ConfigExport(name, info.features, info.description or "", tuple(splits), download_size)


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link a file (the staging copy of a large repository costs no space), else copy it."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@contextmanager
def staged_repository(out: Path) -> Iterator[Path]:
    """A staging copy of the repository folder ``out``, swapped in only if the block succeeds.

    The copy starts as hard links to ``out``'s files, which is safe because writers here
    never modify a file in place: they write new files and rename them over old ones.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(out.parent, f"{STAGING_PREFIX}{out.name}-")
    try:
        if out.is_dir():
            shutil.copytree(
                out, staging, copy_function=_link_or_copy, dirs_exist_ok=True,
                ignore=shutil.ignore_patterns(STAGING_PREFIX + "*"),
            )
        yield staging
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
