"""The ``uouo`` builder: config ids, metadata, the source it falls back to, and the bare load_dataset route."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rf100vl_hf import paths
from rf100vl_hf.errors import DatasetNotFoundError
from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.uouo.builder import DEFAULT_NUM_MOSAICS, load_uouo, locate_source, uouo_builder
from rf100vl_hf.uouo.prompts import BOX_PROMPT, QUADRANTS
from rf100vl_hf.uouo.sample import CATEGORIES, IMAGES_PER_CATEGORY, SAMPLE_NAME
from rf100vl_hf.uouo.sources import read_source


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
    with pytest.raises(ValueError, match="num_mosaics must be at least 1"):
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
