"""The record of a build (``build_record``): found by stat while the exports' files are as they
were built, never when one changed; its config ids and cache folder are datasets' own; records
from before it held the metadata are written again by the builder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import datasets
import pytest

from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.rf100vl.build_record import (
    BUILDER_NAME,
    INFO_FILE,
    RECORD_FILE,
    VERSION,
    build_fingerprint,
    config_id,
    datasets_cache,
    unchanged_build,
)
from rf100vl_hf.rf100vl.builder import Rf100vlConfig, builder_of
from rf100vl_hf.rf100vl.request import DatasetRequest, SplitParameters

from tests.rf100vl.exports import copy_export


@pytest.fixture(scope="module")
def built(sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[DatasetRequest, Any]:
    """A copy of the sample, with its official few-shot export, built once (read-only: copy to change)."""
    root = tmp_path_factory.mktemp("record")
    copy_export(sample_root / "sample", root / "data" / "shapes")
    copy_export(sample_root / "sample", root / "fewshot" / "shapes")
    request = DatasetRequest(root / "data", root / "fewshot", root / "cache")
    builder = builder_of(request, "shapes", progress=False)
    builder.download_and_prepare()
    return request, builder


def _copy(built: tuple[DatasetRequest, Any], tmp_path: Path) -> DatasetRequest:
    """The built exports and cache copied with their mtimes, so that a test may change them."""
    request, _ = built
    for folder in ("data", "fewshot", "cache"):
        shutil.copytree(request.data_dir.parent / folder, tmp_path / folder)
    return DatasetRequest(tmp_path / "data", tmp_path / "fewshot", tmp_path / "cache")


def test_an_unchanged_build_is_found_with_what_the_builder_knows(built: tuple[DatasetRequest, Any]) -> None:
    request, builder = built
    record = unchanged_build(request, "shapes")
    assert record is not None and record.path == Path(builder.cache_dir) and record.config_id == "shapes"
    assert record.metadata == read_metadata(builder.info)
    assert record.splits == {name: split.num_examples for name, split in builder.info.splits.items()}
    assert record.fingerprint == build_fingerprint(request, "shapes") == builder.export.fingerprint
    assert record.metadata["fewshot"]["source"] == "official"


def _bytes_changed(path: Path) -> None:
    """Another byte in the same place, the size kept and the mtime one second later."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    before = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))


CHANGES: dict[str, Callable[[Path], None]] = {
    "an image's bytes, same size": lambda root: _bytes_changed(next((root / "data/shapes/test").glob("*.jpg"))),
    "annotations touched": lambda root: os.utime(root / "data/shapes/train/_annotations.coco.json"),
    "a file added": lambda root: (root / "data/shapes/valid/extra.jpg").write_bytes(b"x"),
    "a file removed": lambda root: next((root / "data/shapes/valid").glob("*.jpg")).unlink(),
    "the few-shot export touched": lambda root: _bytes_changed(next((root / "fewshot/shapes/train").glob("*.jpg"))),
}


@pytest.mark.parametrize("change", CHANGES)
def test_any_change_to_the_exports_files_misses_the_build(built: tuple, tmp_path: Path, change: str) -> None:
    request = _copy(built, tmp_path)
    assert unchanged_build(request, "shapes") is not None  # the copy keeps the mtimes
    CHANGES[change](tmp_path)
    assert unchanged_build(request, "shapes") is None


def test_a_full_check_of_the_images_or_another_config_asks_the_builder(built: tuple[DatasetRequest, Any]) -> None:
    request, _ = built
    assert unchanged_build(DatasetRequest(request.data_dir, request.fewshot_dir, request.cache_dir, "full"),
                           "shapes") is None
    other = DatasetRequest(request.data_dir, request.fewshot_dir, request.cache_dir,
                           splits=SplitParameters(fewshot_k=3))
    assert unchanged_build(other, "shapes") is None  # not built


@pytest.mark.parametrize("parameters", [
    {}, {"fewshot_k": 3}, {"semisup_fraction": 0.25, "semisup_seed": 7}, {"test_source": "fewshot"},
    {"fewshot_strategy": "best", "fewshot_candidates": 20}, {"fewshot_k": 5, "fewshot_seed": 1, "semisup_seed": 2},
])
def test_config_ids_are_datasets_own(parameters: dict[str, Any]) -> None:
    theirs = Rf100vlConfig(name="shapes", **parameters).create_config_id({})
    ours = config_id("shapes", SplitParameters(**parameters).changed())
    assert ours == theirs or (ours is None and "=" not in theirs)  # None: datasets hashed the parameters


CACHE_FOLDERS = r"""
import importlib, json, os, sys
from rf100vl_hf.rf100vl.build_record import datasets_cache

settings = json.loads(sys.argv[1])
ours = []
for setting in settings:
    for key in ("HF_DATASETS_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        os.environ.pop(key, None)
    os.environ.update(setting)
    ours.append(str(datasets_cache()))
assert "datasets" not in sys.modules
import datasets.config
theirs = []
for setting in settings:
    for key in ("HF_DATASETS_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        os.environ.pop(key, None)
    os.environ.update(setting)
    theirs.append(os.path.expanduser(str(importlib.reload(datasets.config).HF_DATASETS_CACHE)))
print(json.dumps([ours, theirs]))
"""


def test_the_cache_folder_is_datasets_own_before_it_is_imported(tmp_path: Path) -> None:
    settings = [{}, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {"HF_HOME": "~/hf-home"},
                {"HF_HOME": str(tmp_path / "home"), "HF_DATASETS_CACHE": "~/sets"}]
    done = subprocess.run([sys.executable, "-c", CACHE_FOLDERS, json.dumps(settings)], capture_output=True,
                          text=True, check=True, env={k: v for k, v in os.environ.items() if not k.startswith("HF_")})
    ours, theirs = json.loads(done.stdout)
    assert ours == theirs and len(set(ours)) == len(settings)
    assert datasets_cache(tmp_path / "given") == tmp_path / "given"


def test_a_record_without_the_metadata_is_written_again_by_the_builder(built: tuple, tmp_path: Path) -> None:
    request = _copy(built, tmp_path)
    record = unchanged_build(request, "shapes")
    assert record is not None
    stored = json.loads((record.path / RECORD_FILE).read_text())
    (record.path / RECORD_FILE).write_text(json.dumps({"digest": stored["digest"]}))
    assert unchanged_build(request, "shapes") is None  # the light check needs the metadata
    builder = builder_of(request, "shapes", progress=False)
    builder.download_and_prepare()
    assert builder.reused_unread and Path(builder.cache_dir) == record.path  # found by the builder's own stat
    assert unchanged_build(request, "shapes") == record


def test_the_record_names_datasets_own_folders_and_files(built: tuple[DatasetRequest, Any]) -> None:
    request, builder = built
    expected = datasets_cache(request.cache_dir) / BUILDER_NAME / "shapes" / VERSION
    assert Path(builder.cache_dir).parent == expected and str(builder.info.version) == VERSION
    assert INFO_FILE == datasets.config.DATASET_INFO_FILENAME


def test_a_cache_the_record_cannot_be_written_to_is_still_used(built: tuple, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    from rf100vl_hf.rf100vl import builder as module

    request = _copy(built, tmp_path)
    record = unchanged_build(request, "shapes")
    assert record is not None
    stored = json.loads((record.path / RECORD_FILE).read_text())
    (record.path / RECORD_FILE).write_text(json.dumps({"digest": stored["digest"]}))

    def read_only(build: Path, *args: Any) -> None:
        raise PermissionError(13, "Permission denied", str(build / RECORD_FILE))

    monkeypatch.setattr(module, "write_record", read_only)
    builder = builder_of(request, "shapes", progress=False)
    builder.download_and_prepare()
    assert builder.reused_unread and len(builder.as_dataset(split="test")) == record.splits["test"]
    assert f"{record.path / RECORD_FILE}: Permission denied" in caplog.text


def test_a_reused_build_walks_the_exports_once(built: tuple[DatasetRequest, Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The light check, then the builder given the record it found (as the plugin identifies a
    split, then loads it): each export's folder is walked once; a builder on its own walks too,
    and one of another config does not take the record."""
    request, builder = built
    roots = {os.fspath(request.data_dir / "shapes"), os.fspath(request.fewshot_dir / "shapes")}
    walked: list[str] = []
    scandir = os.scandir

    def counted(path: Any = ".") -> Any:
        if os.fspath(path) in roots:
            walked.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counted)
    record = unchanged_build(request, "shapes")
    again = builder_of(request, "shapes", progress=False, record=record)
    again.download_and_prepare()
    assert sorted(walked) == sorted(roots)
    assert again.reused_unread and again.cache_dir == builder.cache_dir
    assert again.as_dataset(split="test").num_rows == record.splits["test"]
    walked.clear()
    assert builder_of(request, "shapes", progress=False).reused_unread and sorted(walked) == sorted(roots)
    other = DatasetRequest(request.data_dir, request.fewshot_dir, request.cache_dir,
                           splits=SplitParameters(fewshot_k=3))
    assert not builder_of(other, "shapes", progress=False, record=record).reused_unread
