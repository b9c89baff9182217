"""The record of an RF100-VL build, and the check that a build still matches its exports.

Beside datasets' files, each build of the ``rf100vl`` builder (``<cache>/rf100vl/<config
id>/<version>/<hash>/``) holds a record, :data:`RECORD_FILE`: the digest of the relative path, size and
mtime of every file of the exports it was built from (the list itself is not kept: a rerun
reads every build's record, and at full size the lists would be most of what it parses), the dataset's
metadata (:mod:`rf100vl_hf.metadata`: its classes, its export's fingerprint...) and the
examples of each split. A build whose record has the digest of the exports' files as they are now is
that dataset's build, found after one ``stat`` per file, reading none.

Light on purpose: no ``datasets``, no ``pyarrow``. ``rf100vl-hf prepare`` of exports that
did not change, and a resumed pair that needs a build's fingerprint, read the record and
stop there, without the second or more of importing datasets (README, "Loading datasets";
``docs/cli.md``). Where datasets itself would hash the config id (long split parameters),
:func:`config_id` gives up and the builder is asked instead.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote_plus

import xxhash

from rf100vl_hf.rf100vl.request import DatasetRequest
from rf100vl_hf.rf100vl.sources import locate

BUILDER_NAME = "rf100vl"
VERSION = "1.0.0"
"""The builder's datasets version: the folder between the config id and the build's hash."""
FORMAT_VERSION = "4"
"""Bumped whenever the normalisation or the stored metadata changes, so an old cache is not
reused (3: the few-shot strategy in the metadata; 4: the test split's source and how the
few-shot classes were matched)."""
RECORD_FILE = "rf100vl_manifest.json"
INFO_FILE = "dataset_info.json"
"""datasets' own file in a build, written last: a build without it is not complete."""
SHORT_SUFFIX = 32
"""datasets spells a config id's parameters out up to this length, and hashes longer ones."""


@dataclass(frozen=True)
class BuildRecord:
    """A complete build as its record describes it: where it is, the digest of the exports'
    files it was built from, the dataset's metadata and the examples of each split."""

    path: Path
    digest: str
    metadata: dict[str, Any]
    splits: dict[str, int]

    @property
    def fingerprint(self) -> str | None:
        """The content fingerprint of the full export the build holds (a row's ``dataset_fingerprint``)."""
        return self.metadata.get("fingerprint")

    @property
    def config_id(self) -> str:
        return self.path.parts[-3]


def datasets_cache(cache_dir: str | Path | None = None) -> Path:
    """The folder datasets caches builds in: ``cache_dir``, else ``HF_DATASETS_CACHE`` as
    datasets reads it (its own value once it is imported, since it reads the environment then)."""
    if cache_dir:
        return Path(os.path.expanduser(str(cache_dir)))
    loaded = sys.modules.get("datasets.config")
    if loaded is not None:
        return Path(os.path.expanduser(str(loaded.HF_DATASETS_CACHE)))
    hf_home = os.path.expanduser(os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"),
                                                                   "huggingface")))
    return Path(os.path.expanduser(os.getenv("HF_DATASETS_CACHE", os.path.join(hf_home, "datasets"))))


def config_id(name: str, changed: dict[str, Any]) -> str | None:
    """The config id datasets gives ``name`` with the split parameters ``changed`` from the
    defaults, or None where datasets would hash them (their spelling longer than :data:`SHORT_SUFFIX`)."""
    if not changed:
        return name
    suffix = ",".join(f"{key}={quote_plus(str(value))}" for key, value in sorted(changed.items()))
    return f"{name}-{suffix}" if len(suffix) <= SHORT_SUFFIX else None


def file_manifest(roots: dict[str, Path | None]) -> list[list[Any]]:
    """``[label/relative path, size, mtime_ns]`` of every file under each root, sorted: one ``stat`` per file.

    Files are stat'ed through symlinks (a linked file's contents are what a build holds);
    folders are walked without following links, a linked folder being listed as one entry.
    """
    entries: list[list[Any]] = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, f"{prefix}{entry.name}/")
                    continue
                try:
                    stat = entry.stat()
                except OSError:  # a dangling link: the reader names it if the export uses it
                    stat = entry.stat(follow_symlinks=False)
                entries.append([prefix + entry.name, stat.st_size, stat.st_mtime_ns])

    for label, root in roots.items():
        if root is not None:
            walk(str(root), f"{label}/")
    return sorted(entries)


def manifest_digest(manifest: list[list[Any]]) -> str:
    return xxhash.xxh3_128_hexdigest(json.dumps([FORMAT_VERSION, manifest]).encode())


def _stored(build: Path) -> dict[str, Any]:
    """What ``build``'s record file holds; empty where it is missing or damaged."""
    try:
        stored = json.loads((build / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def _parsed(build: Path, stored: dict[str, Any]) -> BuildRecord | None:
    digest, metadata, splits = stored.get("digest"), stored.get("metadata"), stored.get("splits")
    if not (isinstance(digest, str) and isinstance(metadata, dict) and isinstance(splits, dict)):
        return None
    return BuildRecord(build, digest, metadata, splits)


def read_record(build: Path) -> BuildRecord | None:
    """``build``'s record, or None where the build is incomplete or its record missing, damaged
    or written before records held the metadata (the builder writes it again on its next use)."""
    return _parsed(build, _stored(build)) if is_complete(build) else None


def write_record(build: Path, manifest: list[list[Any]], metadata: dict[str, Any], splits: dict[str, int]) -> None:
    """Store ``build``'s record (written to a temporary name, then renamed)."""
    temporary = build / f".{RECORD_FILE}.{os.getpid()}"
    record = {"digest": manifest_digest(manifest), "metadata": metadata, "splits": splits}
    temporary.write_text(json.dumps(record), encoding="utf-8")
    os.replace(temporary, build / RECORD_FILE)


def is_complete(build: Path) -> bool:
    return (build / INFO_FILE).is_file()


def _recorded(version_dir: Path, digest: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The complete builds in ``version_dir`` whose record has ``digest``, with the record
    (hidden folders, builds being written, are skipped)."""
    if not version_dir.is_dir():
        return
    for build in sorted(version_dir.iterdir()):
        if build.is_dir() and not build.name.startswith("."):
            stored = _stored(build)
            if stored.get("digest") == digest and is_complete(build):
                yield build, stored


def build_matching(version_dir: Path, digest: str) -> Path | None:
    """The complete build in ``version_dir`` whose record has ``digest`` (a record of any format), if any."""
    return next((build for build, _ in _recorded(version_dir, digest)), None)


def unchanged_build(request: DatasetRequest, name: str) -> BuildRecord | None:
    """The record of the build of ``name`` (as ``request`` asks for it) whose exports' files
    are as they were when it was built, after one ``stat`` per file; None when a file changed,
    none was built, the request asks for every image to be decoded (``verify_images="full"``)
    or the config id is one datasets hashes: then the builder decides (:func:`.builder.builder_of`)."""
    if request.verify_images == "full":
        return None
    identifier = config_id(name, request.splits.changed())
    if identifier is None:
        return None
    source = locate(name, request.data_dir, request.fewshot_dir)
    manifest = file_manifest({"full": source.root, "fewshot": source.fewshot_root})
    version_dir = datasets_cache(request.cache_dir) / BUILDER_NAME / identifier / VERSION
    found = (_parsed(build, stored) for build, stored in _recorded(version_dir, manifest_digest(manifest)))
    return next((record for record in found if record is not None), None)


def build_fingerprint(request: DatasetRequest, name: str) -> str | None:
    """The fingerprint of ``name``'s export as its unchanged build records it, with no Arrow
    file opened and datasets not imported; None when the builder must decide (see :func:`unchanged_build`)."""
    record = unchanged_build(request, name)
    return record.fingerprint if record is not None else None
