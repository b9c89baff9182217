"""The ``uouo`` builder: config ids, metadata, the source it falls back to, the bare load_dataset route,
the builder from parameters alone, and parallel building."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.uouo.builder import DEFAULT_NUM_MOSAICS, Uouo, cached_crop, load_uouo, locate_source, uouo_builder
from rf100vl_hf.uouo.defaults import MAX_DEFAULT_NUM_PROC, default_num_proc
from rf100vl_hf.uouo.prompts import BOX_PROMPT, QUADRANTS
from rf100vl_hf.uouo.sample import CATEGORIES, IMAGES_PER_CATEGORY, SAMPLE_NAME, write_sample_source
from rf100vl_hf.uouo.sources import DuplicateCutoutWarning, read_source


def test_config_id_is_bare_for_default_parameters(iotkits: Path, tiny_clip: str) -> None:
    plain = uouo_builder("mmd", iotkits, clip_model=tiny_clip, clip_pretrained=None, progress=False)
    explicit = uouo_builder("mmd", iotkits, clip_model=tiny_clip, clip_pretrained=None, progress=False,
                            num_mosaics=DEFAULT_NUM_MOSAICS, seed=0, sigma=10.0)
    changed = uouo_builder("mmd", iotkits, clip_model=tiny_clip, clip_pretrained=None, progress=False, seed=3)
    assert plain.config_id == explicit.config_id == "mmd"
    assert changed.config_id.startswith("mmd-") and changed.config.seed == 3
    assert plain.hash == explicit.hash
    other_model = uouo_builder("mmd", iotkits, clip_model="ViT-B-32", clip_pretrained=None, progress=False)
    assert other_model.hash != plain.hash and other_model.config_id == "mmd"


def test_unknown_parameter_and_config(iotkits: Path, tiny_clip: str) -> None:
    with pytest.raises(TypeError, match="unknown UOUO parameters \\['mosaics'\\]"):
        uouo_builder("mmd", iotkits, clip_model=tiny_clip, clip_pretrained=None, mosaics=3)
    with pytest.raises(ValueError, match="num_mosaics must be an integer of at least 1"):
        uouo_builder("mmd", iotkits, clip_model=tiny_clip, clip_pretrained=None, num_mosaics=0)
    with pytest.raises(ValueError, match="unknown neighbour route 'fast'"):
        uouo_builder("mmd", iotkits, clip_model=tiny_clip, clip_pretrained=None, progress=False, route="fast")
    with pytest.raises(ValueError, match="BuilderConfig 'hard' not found"):
        uouo_builder("hard", iotkits, clip_model=tiny_clip, clip_pretrained=None, progress=False)


def test_metadata_describes_the_build(iotkits: Path, tiny_clip: str) -> None:
    builder = uouo_builder("random", iotkits, clip_model=tiny_clip, clip_pretrained=None, progress=False,
                           num_mosaics=7, seed=5, sigma=4.0)
    meta = read_metadata(builder.info)
    source = read_source(iotkits, progress=False)
    assert meta["benchmark"] == "uouo" and meta["config"] == "random"
    assert meta["source"]["fingerprint"] == source.fingerprint and meta["categories"] == source.categories
    assert meta["source"]["images"] == 50
    assert meta["clip"]["model"] == tiny_clip and meta["clip"]["weights"] == "random-init-seed0"
    assert (meta["mmd"]["sigma"], meta["mmd"]["route"], meta["seed"], meta["num_mosaics"]) == (4.0, "exact", 5, 7)
    assert meta["quadrants"] == list(QUADRANTS) and meta["prompts"]["box"] == BOX_PROMPT


def test_source_falls_back_to_the_embedded_sample(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sample = locate_source()
    assert sample.name == SAMPLE_NAME
    source = read_source(sample, progress=False)
    assert source.categories == sorted(CATEGORIES)
    assert all(len(v) == IMAGES_PER_CATEGORY for v in source.items.values())
    monkeypatch.setenv(paths.UOUO_SOURCE_ENV, str(tmp_path / "missing"))
    with pytest.raises(DatasetNotFoundError, match="missing"):
        locate_source()
    monkeypatch.setenv(paths.UOUO_SOURCE_ENV, str(tmp_path))
    assert locate_source() == tmp_path


def test_bare_load_dataset_finds_the_prepared_cache(tiny_clip: str, tmp_path: Path) -> None:
    """After one default build, ``load_dataset("uouo", "mmd")`` works offline from anywhere."""
    built = load_uouo("mmd", clip_model=tiny_clip, clip_pretrained=None, progress=False)
    assert len(built) == DEFAULT_NUM_MOSAICS
    script = (
        "import json, datasets\n"
        "from rf100vl_hf.metadata import read_metadata\n"
        "ds = datasets.load_dataset('uouo', 'mmd', split='test')\n"
        "row = ds[5]\n"
        "print(json.dumps({'rows': len(ds), 'fingerprint': read_metadata(ds)['source']['fingerprint'],\n"
        "                  'box': row['target_box'], 'size': row['image'].size}))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] == DEFAULT_NUM_MOSAICS and result["size"] == [800, 800]
    assert result["fingerprint"] == read_metadata(built)["source"]["fingerprint"]
    assert result["box"] == built[5]["target_box"]


def _images(ds: datasets.Dataset) -> list[bytes]:
    return [row["image"]["bytes"] for row in ds.cast_column("image", datasets.Image(decode=False))]


def test_load_dataset_builder_from_parameters_alone(iotkits: Path, tiny_clip: str, tmp_path: Path) -> None:
    """datasets makes the builder from config parameters; it builds what ``load_uouo`` builds, in the same cache."""
    builder = datasets.load_dataset_builder(
        "rf100vl_hf.uouo.builder", "random", data_dir=str(iotkits), cache_dir=str(tmp_path / "a"),
        clip_model=tiny_clip, clip_pretrained="none", num_mosaics=4, seed=2, alpha_threshold=8, progress=False,
    )
    assert isinstance(builder, Uouo) and builder.config.num_mosaics == 4 and builder.config.seed == 2
    builder.download_and_prepare()
    built = builder.as_dataset(split="test")
    reference = load_uouo("random", source_dir=iotkits, cache_dir=tmp_path / "b", clip_model=tiny_clip,
                          clip_pretrained=None, num_mosaics=4, seed=2, progress=False)
    assert _images(built) == _images(reference) and read_metadata(built) == read_metadata(reference)
    assert Path(builder.cache_dir).relative_to(tmp_path / "a").parts[:2] == ("uouo", builder.config_id)
    direct = Uouo(config_name="random", source_dir=str(iotkits), cache_dir=str(tmp_path / "b"), clip_model=tiny_clip,
                  clip_pretrained="none", num_mosaics=4, seed=2, progress=False)
    assert direct.cache_dir.removeprefix(str(tmp_path / "b")) == builder.cache_dir.removeprefix(str(tmp_path / "a"))
    with pytest.raises(ValueError, match="doesn't have a 'mosaics' key"):
        datasets.load_dataset_builder("rf100vl_hf.uouo.builder", "mmd", data_dir=str(iotkits), mosaics=3)


def test_parallel_build_is_byte_identical(iotkits: Path, tiny_clip: str, tmp_path: Path) -> None:
    common = {"source_dir": iotkits, "clip_model": tiny_clip, "clip_pretrained": None, "num_mosaics": 10,
              "progress": False}
    cached_crop.cache_clear()
    single = load_uouo("mmd", cache_dir=tmp_path / "one", num_proc=1, **common)
    used = {source_id for row in single["objects"] for source_id in row["source_id"]}
    assert cached_crop.cache_info().misses == len(used) < 40  # each cut-out decoded once in this process
    parallel = load_uouo("mmd", cache_dir=tmp_path / "two", num_proc=2, **common)
    assert len(list((tmp_path / "two").rglob("uouo-test-*.arrow"))) == 2  # two processes wrote
    assert _images(parallel) == _images(single)
    assert parallel.remove_columns("image").to_list() == single.remove_columns("image").to_list()
    again = datasets.load_dataset("rf100vl_hf.uouo.builder", "mmd", data_dir=str(iotkits), split="test",
                                  cache_dir=str(tmp_path / "three"), num_proc=2, clip_model=tiny_clip,
                                  clip_pretrained="none", num_mosaics=10, progress=False)
    assert _images(again) == _images(single)  # datasets' own num_proc, through load_dataset


def test_default_num_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert default_num_proc() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert default_num_proc() == MAX_DEFAULT_NUM_PROC


def test_metadata_counts_haze_and_duplicates(tmp_path: Path, tiny_clip: str) -> None:
    root = write_sample_source(tmp_path / "src")
    shutil.copyfile(root / "star" / "star_01.png", root / "star" / "star_09.png")
    with pytest.warns(DuplicateCutoutWarning):
        builder = uouo_builder("random", root, clip_model=tiny_clip, clip_pretrained=None, progress=False)
    source = read_metadata(builder.info)["source"]
    assert (source["duplicates"], source["hazy"], source["alpha_threshold"]) == (1, 0, 8)
    assert source["license"] == {"id": "apache-2.0", "name": "apache-2.0", "origin": "manifest.json"}
