"""Writing configs into a repository folder: shards replaced on re-export, merges, no half-written folder."""

from __future__ import annotations

import shutil

import datasets
import pytest

from rf100vl_hf.hub import rf100vl_card as hub_card
from rf100vl_hf.hub.card import read_card
from rf100vl_hf.hub.export import STAGING_PREFIX, write_config
from rf100vl_hf.hub.rf100vl_card import export_rf100vl
from rf100vl_hf.rf100vl.builder import rf100vl_builder

from tests.hub.source import expected_rows


@pytest.fixture(scope="module")
def sample_builder(sample_root):
    builder = rf100vl_builder("sample", data_dir=sample_root, progress=False)
    builder.download_and_prepare()
    return builder


def _shards(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_re_export_replaces_the_old_shards(sample_builder, sample_root, tmp_path):
    small = write_config(sample_builder, tmp_path, max_shard_bytes=60_000)
    train = next(s for s in small.splits if s.name == "train")
    assert len(train.files) > 1
    assert _shards(tmp_path / "sample") == sorted(f.split("/")[1] for s in small.splits for f in s.files)

    again = write_config(sample_builder, tmp_path)
    assert all(len(s.files) == 1 for s in again.splits)
    assert _shards(tmp_path / "sample") == sorted(f"{s.name}-00000-of-00001.parquet" for s in again.splits)
    assert [p.name for p in tmp_path.iterdir()] == ["sample"]  # no staging folder left behind
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / "sample" / "test-*.parquet"), split="train")
    assert rows["image_id"] == [r["image_id"] for r in expected_rows(sample_root / "sample", "test")]


def test_an_unprepared_builder_is_refused(sample_root, tmp_path):
    builder = rf100vl_builder("sample", data_dir=sample_root, progress=False, cache_dir=tmp_path / "cache")
    with pytest.raises(ValueError, match="download_and_prepare"):
        write_config(builder, tmp_path / "repo")


@pytest.fixture
def two_exports(sample_root, tmp_path):
    """Two copies of the sample export under other names: custom exports in one data folder."""
    data_dir = tmp_path / "data"
    for name in ("shapes-a", "shapes-b"):
        shutil.copytree(sample_root / "sample", data_dir / name)
    return data_dir


def test_an_export_into_an_existing_folder_keeps_the_other_configs(two_exports, tmp_path):
    out = tmp_path / "repo"
    export_rf100vl(["shapes-a"], out, data_dir=two_exports)
    export_rf100vl(["shapes-b"], out, data_dir=two_exports)
    assert [c.name for c in read_card(out)] == ["shapes-a", "shapes-b"]
    for name in ("shapes-a", "shapes-b"):
        loaded = datasets.load_dataset(str(out), name, split="validation")
        assert loaded["image_id"] == [r["image_id"] for r in expected_rows(two_exports / name, "validation")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "repo"]


def test_an_interrupted_export_leaves_the_previous_repository(two_exports, tmp_path, monkeypatch):
    out = tmp_path / "repo"
    export_rf100vl(["shapes-a"], out, data_dir=two_exports)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(hub_card, "write_card", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_rf100vl(["shapes-a", "shapes-b"], out, data_dir=two_exports)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_an_empty_list_of_datasets_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no RF100-VL dataset"):
        export_rf100vl([], tmp_path / "repo")
