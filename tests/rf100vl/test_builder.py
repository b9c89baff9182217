"""The rf100vl builder: round trips through the bare ``load_dataset`` call, metadata, few-shot sources."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import datasets
import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.rf100vl import catalog
from rf100vl_hf.rf100vl.builder import load_rf100vl, rf100vl_builder
from rf100vl_hf.rf100vl.instructions import parse_instructions
from rf100vl_hf.rf100vl.reader import SPLIT_FOLDERS
from rf100vl_hf.rf100vl.splits import FewShotWarning
from rf100vl_hf.sample import INSTRUCTIONS, SUPERCATEGORY
from tests.rf100vl.exports import copy_export, edit, expected_rows, load, save

SPLITS = ["train", "validation", "test", "fewshot_10", "semisup_10"]

BARE_LOAD = r"""
import hashlib, json, sys
import datasets
from rf100vl_hf.metadata import read_metadata

out = {}
for name in sys.argv[2:]:
    for split in sys.argv[1].split(","):
        ds = datasets.load_dataset("rf100vl", name, split=split)
        names = ds.features["objects"]["category"].feature.names
        classes = read_metadata(ds)["classes"]
        rows = []
        for row in ds.cast_column("image", datasets.Image(decode=False)):
            objects = dict(row["objects"], category=[names[c] for c in row["objects"]["category"]])
            image = row.pop("image")
            rows.append(dict(row, objects=objects, sha256=hashlib.sha256(image["bytes"]).hexdigest()))
        out[name + "/" + split] = {"rows": rows, "classes": classes}
print(json.dumps(out))
"""


def _prepare(name: str, data_dir: Path, **kwargs: Any) -> datasets.DatasetDict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewShotWarning)
        return load_rf100vl(name, data_dir=data_dir, progress=False, **kwargs)


@pytest.fixture(scope="module")
def roots(shared_data: Path, sample_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real exports, the sample, and a generated rf100vl-cleaned variant of a real one."""
    generated = tmp_path_factory.mktemp("generated")
    cleaned = copy_export(shared_data / "microcontroller", generated / "boards-cleaned", link_images=True)

    def clean(data: dict) -> None:
        data["categories"] = [{**c, "id": c["id"] - 1} for c in data["categories"] if c["id"] != 0]
        for ann in data["annotations"]:
            ann["category_id"] -= 1

    edit(cleaned, clean, folders=("train", "valid", "test"))
    return {
        "microcontroller": shared_data / "microcontroller",
        "chess-pieces": shared_data / "chess-pieces",
        "sample": sample_root / "sample",
        "boards-cleaned": cleaned,
    }


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's own datasets cache: the bare call finds the latest build of a name, and other
    tests build configs of the same names from other contents."""
    return tmp_path_factory.mktemp("hf-datasets")


@pytest.fixture(scope="module")
def prepared(roots: dict[str, Path], cache: Path) -> dict[str, datasets.DatasetDict]:
    return {name: _prepare(name, root.parent, cache_dir=cache) for name, root in roots.items()}


@pytest.fixture(scope="module")
def bare(prepared: dict, cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every split of every prepared config, loaded by a fresh process elsewhere, offline, by name only."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(cache))
    result = subprocess.run(
        [sys.executable, "-c", BARE_LOAD, ",".join(SPLITS), *prepared],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", ["microcontroller", "chess-pieces", "sample", "boards-cleaned"])
def test_bare_load_dataset_gives_back_every_image_box_class_and_id(name: str, roots: dict, bare: dict) -> None:
    root = roots[name]
    for split, folder in SPLIT_FOLDERS.items():
        expected = expected_rows(root, folder)
        for row in expected:
            row["sha256"] = hashlib.sha256(row.pop("bytes")).hexdigest()
        assert bare[f"{name}/{split}"]["rows"] == expected, split
    categories = sorted(load(root)["categories"], key=lambda c: c["id"])
    dataset_level = categories[0]["id"] == 0 and categories[0]["supercategory"] == "none"
    assert bare[f"{name}/test"]["classes"] == [c["name"] for c in categories[1 if dataset_level else 0 :]]


@pytest.mark.parametrize("name", ["microcontroller", "chess-pieces", "sample", "boards-cleaned"])
def test_derived_splits_hold_train_images_and_their_boxes(name: str, roots: dict, bare: dict) -> None:
    train = {row["file_name"]: row for row in bare[f"{name}/train"]["rows"]}
    semisup = bare[f"{name}/semisup_10"]["rows"]
    assert len(semisup) == max(1, round(0.1 * len(train)))
    assert [row["file_name"] for row in semisup] == sorted(row["file_name"] for row in semisup)
    for split in ("fewshot_10", "semisup_10"):
        rows = bare[f"{name}/{split}"]["rows"]
        assert rows
        ids = [i for row in rows for i in row["objects"]["id"]]
        assert ids == list(range(1, len(ids) + 1))
        for row in rows:
            source = train[row["file_name"]]
            assert row["sha256"] == source["sha256"]
            kept = list(zip(row["objects"]["bbox"], row["objects"]["category"]))
            labelled = list(zip(source["objects"]["bbox"], source["objects"]["category"]))
            assert kept and all(box in labelled for box in kept)
            if split == "semisup_10":
                assert row["objects"] == dict(source["objects"], id=row["objects"]["id"])


def test_the_sample_carries_its_metadata(prepared: dict) -> None:
    ds = prepared["sample"]
    meta = read_metadata(ds)
    assert list(ds) == SPLITS
    assert (meta["name"], meta["domain"], meta["layout"]) == ("sample", "custom", "roboflow")
    assert meta["supercategory"] == SUPERCATEGORY
    assert (meta["classes"], meta["category_ids"]) == (["circle", "square", "triangle"], [1, 2, 3])
    assert ds["test"].features["objects"]["category"].feature.names == meta["classes"]
    assert meta["fewshot"] | {"fingerprint": None} == {
        "split": "fewshot_10",
        "source": "generated",
        "k": 10,
        "seed": 0,
        "fingerprint": None,
        "federated": True,
        "instances": {"circle": 10, "square": 10, "triangle": 10},
    }
    sections = parse_instructions(INSTRUCTIONS).classes
    assert meta["instructions"]["raw"] == INSTRUCTIONS
    assert meta["instructions"]["classes"]["square"]["instructions"] == sections["square"].instructions
    assert (meta["license"], meta["homepage"]) == ("CC0 1.0", "https://github.com/rf100vl-hf/rf100vl-hf")
    assert meta["zero_area_boxes"] == {"train": 2, "validation": 2, "test": 2}
    assert meta["repairs"] == {"train": {}, "validation": {}, "test": {}}
    assert len(meta["fingerprint"]) == 32 and ds["test"].info.builder_name == "rf100vl"


def _soda(sample_root: Path, tmp_path: Path, shared_data: Path) -> tuple[Path, Path]:
    """A full export named like a catalogue dataset, and an official few-shot export of it."""
    renamed = {"circle": "Coca-Cola", "square": "Fanta", "triangle": "Sprite"}
    full = copy_export(sample_root / "sample", tmp_path / "full" / "soda-bottles", link_images=True)
    edit(
        full,
        lambda d: [c.update(name=renamed.get(c["name"], c["name"])) for c in d["categories"]],
        folders=("train", "valid", "test"),
    )
    fsod = tmp_path / "fsod" / "soda-bottles"
    data = load(full)
    kept = data["images"][:6]
    names = {c["id"]: c["name"] for c in data["categories"]}
    new_ids = {"Sprite": 1, "Coca-Cola": 2, "Fanta": 3}  # another order than the full export's
    (fsod / "train").mkdir(parents=True)
    for image in kept:
        (fsod / "train" / image["file_name"]).symlink_to((full / "train" / image["file_name"]).resolve())
    save(fsod, "train", {
        "images": kept,
        "annotations": [
            dict(a, category_id=new_ids[names[a["category_id"]]])
            for a in data["annotations"] if a["image_id"] in {i["id"] for i in kept}
        ],
        "categories": [data["categories"][0]] + [
            {"id": i, "name": n, "supercategory": data["categories"][0]["name"]} for n, i in new_ids.items()
        ],
    })  # fmt: skip
    readme = shared_data / "rf100vl-instructions" / "soda-bottles-fsod-haga.README.dataset.txt"
    (fsod / "README.dataset.txt").write_bytes(readme.read_bytes())
    return full, fsod


def test_an_official_fewshot_export_is_the_fewshot_split(sample_root: Path, tmp_path: Path, shared_data: Path) -> None:
    full, fsod = _soda(sample_root, tmp_path, shared_data)
    ds = _prepare("soda-bottles", full.parent, fewshot_dir=fsod.parent, cache_dir=tmp_path / "cache")
    meta = read_metadata(ds)
    assert (meta["domain"], meta["rf20vl"]) == (catalog.get("soda-bottles").domain, True)
    assert meta["fewshot"]["source"] == "official" and meta["fewshot"]["federated"] is False
    assert meta["license"] == "MIT"  # the few-shot export's README comes first
    assert meta["instructions"]["classes"]["Fanta"]["description"].startswith("Fanta bottles are characterized")
    fewshot = ds["fewshot_10"]
    names = fewshot.features["objects"]["category"].feature.names
    source = load(fsod)
    source_names = {c["id"]: c["name"] for c in source["categories"]}
    assert fewshot["file_name"] == [i["file_name"] for i in source["images"]]
    assert [names[c] for row in fewshot["objects"] for c in row["category"]] == [
        source_names[a["category_id"]] for a in source["annotations"]
    ]


def test_a_fewshot_class_missing_from_the_full_export_is_named(
    sample_root: Path, tmp_path: Path, shared_data: Path
) -> None:
    full, fsod = _soda(sample_root, tmp_path, shared_data)
    edit(fsod, lambda d: d["categories"][1].update(name="Pepsi"))
    with pytest.raises(DataError) as caught:
        rf100vl_builder("soda-bottles", full.parent, fsod.parent, progress=False)
    assert (Path(caught.value.path), caught.value.field) == (fsod / "train" / "_annotations.coco.json", "categories")
    assert "Pepsi" in str(caught.value)


def test_the_cache_is_laid_out_where_the_bare_call_looks(prepared: dict, roots: dict, cache: Path) -> None:
    """datasets' cache fallback globs <cache>/rf100vl/<config>/*/* and keeps folders whose
    dataset_info.json names that same config."""
    builder = rf100vl_builder("sample", roots["sample"].parent, cache_dir=cache, progress=False)
    folder = Path(builder.cache_dir)
    assert folder.relative_to(cache).parts[:2] == ("rf100vl", "sample")
    info = json.loads((folder / "dataset_info.json").read_text(encoding="utf-8"))
    assert (info["config_name"], info["dataset_name"], info["builder_name"]) == ("sample", "rf100vl", "rf100vl")


def test_split_parameters_make_their_own_config(sample_root: Path, tmp_path: Path) -> None:
    builder = rf100vl_builder(
        "sample", sample_root, cache_dir=tmp_path, progress=False, fewshot_k=3, fewshot_seed=1, semisup_fraction=0.25
    )
    builder.download_and_prepare()
    ds = builder.as_dataset()
    assert list(ds) == ["train", "validation", "test", "fewshot_3", "semisup_25"]
    assert builder.config_id != "sample" and Path(builder.cache_dir).relative_to(tmp_path).parts[1] != "sample"
    assert read_metadata(ds)["fewshot"]["instances"] == {"circle": 3, "square": 3, "triangle": 3}
    assert len(ds["semisup_25"]) == 6


def test_a_prepared_cache_is_reused_until_the_export_changes(sample_root: Path, tmp_path: Path) -> None:
    root = copy_export(sample_root / "sample", tmp_path / "shapes", link_images=True)
    first = rf100vl_builder("shapes", tmp_path, cache_dir=tmp_path / "cache", progress=False)
    first.download_and_prepare()
    arrow = sorted(Path(first.cache_dir).glob("*.arrow"))
    stamps = [p.stat().st_mtime_ns for p in arrow]
    again = rf100vl_builder("shapes", tmp_path, cache_dir=tmp_path / "cache", progress=False)
    again.download_and_prepare()
    assert again.cache_dir == first.cache_dir and [p.stat().st_mtime_ns for p in arrow] == stamps
    edit(root, lambda d: d["annotations"][0].update(iscrowd=1), folders=("test",))
    changed = rf100vl_builder("shapes", tmp_path, cache_dir=tmp_path / "cache", progress=False)
    assert changed.cache_dir != first.cache_dir


def test_full_image_verification_reaches_the_reader(sample_root: Path, tmp_path: Path) -> None:
    root = copy_export(sample_root / "sample", tmp_path / "shapes")
    png = root / "train" / next(i["file_name"] for i in load(root)["images"] if i["file_name"].endswith(".png"))
    data = bytearray(png.read_bytes())
    start = data.index(b"IDAT") + 4
    data[start + 40 : start + 200] = bytes(160)  # broken pixels; the chunk layout and end marker stay
    png.write_bytes(bytes(data))
    rf100vl_builder("shapes", tmp_path, cache_dir=tmp_path / "cache", progress=False)  # headers are fine
    with pytest.raises(DataError) as caught:
        rf100vl_builder("shapes", tmp_path, cache_dir=tmp_path / "cache", progress=False, verify_images="full")
    assert (Path(caught.value.path), caught.value.field) == (png, "image")
