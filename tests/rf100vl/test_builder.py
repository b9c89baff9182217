"""The rf100vl builder: round trips through the bare ``load_dataset`` call, metadata, few-shot sources,
construction from parameters alone, reuse of an unchanged export by stat, and killed builds."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import datasets
import pytest

from rf100vl_hf import catalog
from rf100vl_hf.errors import DataError
from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.rf100vl.builder import ParameterError, load_rf100vl, remove_leftovers, rf100vl_builder
from rf100vl_hf.rf100vl.instructions import parse_instructions
from rf100vl_hf.rf100vl.reader import SPLIT_FOLDERS, read_export
from rf100vl_hf.rf100vl.splits import FewShotWarning, fewshot
from rf100vl_hf.sample import INSTRUCTIONS, SUPERCATEGORY

from pytest_rf100vl.kinds.rf100vl.identity import split_parameters

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
        "strategy": "random",
        "candidates": None,
        "fingerprint": None,
        "federated": True,
        "instances": {"circle": 10, "square": 10, "triangle": 10},
        "class_match": None,  # no few-shot export whose classes to match
        "renamed": {},
    }
    assert meta["test"] == {"source": "full", "fingerprint": None}
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
        (fsod / "train" / image["file_name"]).hardlink_to((full / "train" / image["file_name"]).resolve())
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


def test_an_official_fewshot_export_wins_over_the_strategy(
    sample_root: Path, tmp_path: Path, shared_data: Path
) -> None:
    full, fsod = _soda(sample_root, tmp_path, shared_data)
    ds = _prepare("soda-bottles", full.parent, fewshot_dir=fsod.parent, cache_dir=tmp_path / "cache",
                  fewshot_strategy="best", fewshot_candidates=3)  # fmt: skip
    fewshot_meta = read_metadata(ds)["fewshot"]
    assert (fewshot_meta["source"], fewshot_meta["seed"], fewshot_meta["strategy"], fewshot_meta["candidates"]) == (
        "official", None, None, None)
    assert ds["fewshot_10"]["file_name"] == [i["file_name"] for i in load(fsod)["images"]]


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


def test_the_best_strategy_is_a_config_of_its_own(sample_root: Path, tmp_path: Path) -> None:
    random_ds = _prepare("sample", sample_root, cache_dir=tmp_path)
    builder = rf100vl_builder("sample", sample_root, cache_dir=tmp_path, progress=False, fewshot_strategy="best")
    builder.download_and_prepare()
    best_ds = builder.as_dataset()
    assert builder.config_id == "sample-fewshot_strategy=best" and list(best_ds) == SPLITS
    export = read_export(sample_root / "sample", progress=False)
    expected = fewshot(export.splits["train"].images, len(export.classes), strategy="best")
    assert best_ds["fewshot_10"]["file_name"] == [image.file_name for image in expected]
    assert best_ds["fewshot_10"]["objects"] != random_ds["fewshot_10"]["objects"]
    assert best_ds["test"]["objects"] == random_ds["test"]["objects"]
    meta, random_meta = read_metadata(best_ds), read_metadata(random_ds)
    assert (meta["fewshot"]["strategy"], meta["fewshot"]["candidates"], meta["fewshot"]["seed"]) == ("best", 10, 0)
    assert meta["fewshot"]["instances"] == {"circle": 10, "square": 10, "triangle": 10}
    assert json.loads(split_parameters(meta, "fewshot_10", "names")) == {
        "fewshot_source": "generated", "k": 10, "seed": 0, "strategy": "best", "candidates": 10}
    for split, prompt in (("fewshot_10", "names"), ("test", "fewshot")):  # scored on it, or shown it
        assert split_parameters(meta, split, prompt) != split_parameters(random_meta, split, prompt)
    assert json.loads(split_parameters(random_meta, "test", "fewshot"))["examples"]["strategy"] == "random"
    assert split_parameters(meta, "test", "names") == split_parameters(random_meta, "test", "names") == "{}"


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


# ------------------------------------------------------------ made from parameters alone


def test_load_dataset_builder_makes_it_from_parameters_alone(
    sample_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``datasets.load_dataset_builder`` constructs the builder class the way it constructs any
    (the module registered as a packaged builder, as a datasets extension would register it);
    the builder then prepares, pickles, and streams the same rows."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    monkeypatch.setitem(_PACKAGED_DATASETS_MODULES, "rf100vl-params", ("rf100vl_hf.rf100vl.builder", "0"))
    builder = datasets.load_dataset_builder(
        "rf100vl-params", "sample", data_dir=str(sample_root), cache_dir=str(tmp_path),
        fewshot_k=3, semisup_seed=2, progress=False,
    )  # fmt: skip
    assert type(builder).__name__ == "Rf100vl" and builder.config_id == "sample-fewshot_k=3,semisup_seed=2"
    builder.download_and_prepare()
    ds = builder.as_dataset()
    assert list(ds) == ["train", "validation", "test", "fewshot_3", "semisup_10"]
    assert read_metadata(ds)["fewshot"]["instances"] == {"circle": 3, "square": 3, "triangle": 3}
    again = pickle.loads(pickle.dumps(builder))
    assert again.as_dataset(split="test")["file_name"] == ds["test"]["file_name"]
    streamed = builder.as_streaming_dataset(split="test")
    first = next(iter(streamed.cast_column("image", datasets.Image(decode=False))))
    stored = ds["test"].cast_column("image", datasets.Image(decode=False))[0]
    assert first == stored


def test_split_parameters_at_their_defaults_keep_the_bare_config_id(sample_root: Path, tmp_path: Path) -> None:
    builder = rf100vl_builder("sample", sample_root, cache_dir=tmp_path, progress=False, fewshot_k=10, semisup_seed=0)
    assert builder.config_id == "sample"


@pytest.mark.parametrize(
    "parameter, value",
    [("fewshot_k", 0), ("fewshot_k", -3), ("fewshot_k", 2.5), ("semisup_fraction", 2), ("semisup_fraction", 0),
     ("semisup_fraction", float("nan")), ("fewshot_seed", "1"), ("verify_images", "some"),
     ("fewshot_strategy", "worst"), ("fewshot_strategy", None), ("fewshot_candidates", 0),
     ("fewshot_candidates", True)],
)  # fmt: skip
def test_a_parameter_out_of_range_is_named(parameter: str, value: Any, sample_root: Path, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match=parameter):
        rf100vl_builder("sample", sample_root, cache_dir=tmp_path, progress=False, **{parameter: value})


def test_candidates_without_the_best_strategy_are_refused(sample_root: Path, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="fewshot_candidates=5 needs fewshot_strategy='best'"):
        rf100vl_builder("sample", sample_root, cache_dir=tmp_path, progress=False, fewshot_candidates=5)
    best = rf100vl_builder("sample", sample_root, cache_dir=tmp_path, progress=False, fewshot_strategy="best",
                           fewshot_candidates=5)  # fmt: skip
    assert best.config_id not in ("sample", "sample-fewshot_strategy=best")


# ---------------------------------------------------- repeat cost: a manifest, checked by stat


class _Opens:
    """Every file opened under ``root`` while recording (Python's audit hook sees every open,
    by ``open``, ``Path.read_bytes`` or ``os.open``, whatever function does it)."""

    root: Path | None = None
    seen: list[str] = []

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if event == "open" and cls.root is not None and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.fsdecode(args[0])
            if path.startswith(str(cls.root)):
                cls.seen.append(path)

    @classmethod
    def during(cls, root: Path, action: Any) -> list[str]:
        cls.root, cls.seen = root, []
        try:
            action()
        finally:
            cls.root = None
        return cls.seen


sys.addaudithook(_Opens.hook)


def _shapes(sample_root: Path, tmp_path: Path) -> Path:
    return copy_export(sample_root / "sample", tmp_path / "data" / "shapes")


def _build(root: Path, cache: Path, **kwargs: Any) -> Any:
    builder = rf100vl_builder("shapes", root.parent, cache_dir=cache, progress=False, **kwargs)
    builder.download_and_prepare()
    return builder


def test_an_unchanged_export_is_reused_without_opening_any_of_its_files(sample_root: Path, tmp_path: Path) -> None:
    root, cache = _shapes(sample_root, tmp_path), tmp_path / "cache"
    built: dict = {}
    assert _Opens.during(root, lambda: built.update(first=_build(root, cache)))  # the hook sees a build's reads
    first = built["first"]
    loaded: dict = {}
    opened = _Opens.during(root, lambda: loaded.update(ds=load_rf100vl("shapes", "test", root.parent, cache_dir=cache)))
    assert opened == []
    assert loaded["ds"].info.description == first.info.description
    assert loaded["ds"]["file_name"] == first.as_dataset(split="test")["file_name"]


def test_prepare_verifies_the_contents_even_when_nothing_changed(sample_root: Path, tmp_path: Path) -> None:
    root, cache = _shapes(sample_root, tmp_path), tmp_path / "cache"
    first = _build(root, cache)
    images = {str(p) for p in (root / "test").iterdir() if p.name != "_annotations.coco.json"}
    verified: dict = {}
    opened = set(_Opens.during(root, lambda: verified.update(builder=_build(root, cache, verify=True))))
    assert images <= opened
    assert verified["builder"].cache_dir == first.cache_dir  # same contents: nothing rebuilt


def test_a_changed_image_is_rebuilt_and_a_touched_one_is_read_once(sample_root: Path, tmp_path: Path) -> None:
    root, cache = _shapes(sample_root, tmp_path), tmp_path / "cache"
    first = _build(root, cache)
    name = next(i["file_name"] for i in load(root, "test")["images"] if i["file_name"].endswith(".jpg"))
    image = root / "test" / name
    stat = image.stat()
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, new mtime
    touched = _build(root, cache)
    assert touched.cache_dir == first.cache_dir  # same contents: the same build, its manifest refreshed
    assert _Opens.during(root, lambda: _build(root, cache)) == []
    data = bytearray(image.read_bytes())
    data[-3] ^= 0xFF  # a JPEG's entropy-coded data: another pixel, the end marker kept
    image.write_bytes(bytes(data))
    changed = _build(root, cache)
    assert changed.cache_dir != first.cache_dir
    rows = changed.as_dataset(split="test").cast_column("image", datasets.Image(decode=False))
    assert next(row["image"]["bytes"] for row in rows if row["file_name"] == name) == bytes(data)


# ---------------------------------------------------------------------- killed builds

KILLED_BUILD = r"""
import os, signal, sys, warnings
from rf100vl_hf.rf100vl import builder as module

tables = module.Rf100vl._generate_tables

def killed_after_one_table(self, *args, **kwargs):
    for item in tables(self, *args, **kwargs):
        yield item
        os.kill(os.getpid(), signal.SIGKILL)  # as a user's kill -9 in the middle of the build

module.Rf100vl._generate_tables = killed_after_one_table
warnings.simplefilter("ignore")
module.load_rf100vl("shapes", data_dir=sys.argv[1], cache_dir=sys.argv[2], progress=False)
"""


def _bare_test_split(cache: Path) -> datasets.Dataset:
    return datasets.load_dataset("rf100vl", "shapes", split="test", cache_dir=str(cache))


def test_a_killed_prepare_leaves_the_older_build_to_the_bare_call(
    sample_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cache = _shapes(sample_root, tmp_path), tmp_path / "cache"
    older = _build(root, cache)
    edit(root, lambda d: d["annotations"][0].update(iscrowd=1), folders=("test",))
    killed = subprocess.run([sys.executable, "-c", KILLED_BUILD, str(root.parent), str(cache)], timeout=300)
    assert killed.returncode == -9
    version_dir = Path(older.cache_dir).parent
    leftovers = [p for p in version_dir.iterdir() if p.is_dir() and p.name != Path(older.cache_dir).name]
    assert leftovers and all(p.name.startswith(".") for p in leftovers)  # hidden from datasets' cache lookup
    monkeypatch.chdir(tmp_path)
    bare = _bare_test_split(cache)
    assert bare["objects"][0]["iscrowd"][0] == 0 and bare.info.description == older.info.description
    _build(root, cache)  # the next build removes what the killed one left, and completes
    assert not [p for p in leftovers if p.exists()]
    assert _bare_test_split(cache)["objects"][0]["iscrowd"][0] == 1


def test_an_incomplete_folder_of_a_dead_build_is_removed_and_a_living_ones_kept(
    sample_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """datasets' own ``<hash>.incomplete`` folders (visible to the bare call, which then fails)
    are removed when no process holds their build lock."""
    from filelock import FileLock

    root, cache = _shapes(sample_root, tmp_path), tmp_path / "cache"
    build = Path(_build(root, cache).cache_dir)
    dead, living = build.parent / "0123456789abcdef.incomplete", build.parent / "fedcba9876543210.incomplete"
    for leftover in (dead, living):
        leftover.mkdir()
        (leftover / "rf100vl-test.arrow").write_bytes(b"partial")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError):  # the leftover has no dataset_info.json
        _bare_test_split(cache)
    with FileLock(str(build.parent / "fedcba9876543210_builder.lock")):
        assert remove_leftovers(build.parent) == [dead]
    assert living.is_dir() and not dead.exists()
    living.rename(build.parent / ".removed-by-hand")
    assert len(_bare_test_split(cache)) == len(load(root, "test")["images"])


def test_a_licence_stated_only_in_the_coco_json_is_the_datasets_and_its_cards(sample_root: Path, tmp_path: Path) -> None:
    """An export without a README (as some exports come) keeps the licence its annotation files state."""
    from rf100vl_hf.hub.rf100vl_card import hub_license

    export = copy_export(sample_root / "sample", tmp_path / "data" / "bare", link_images=True)
    for readme in export.glob("README*"):
        readme.unlink()
    stated = [{"id": 1, "url": "https://creativecommons.org/publicdomain/zero/1.0/", "name": "Public Domain"}]
    edit(export, lambda data: data.update(licenses=stated), folders=("train", "valid", "test"))
    meta = rf100vl_builder("bare", tmp_path / "data", progress=False).metadata
    assert meta["license"] == "Public Domain"
    assert hub_license(meta["license"]) == ("other", "public-domain", None)
    edit(export, lambda data: data.update(licenses=[{"id": 1, "name": "CC BY 4.0"}, {"id": 2, "name": "MIT"}]),
         folders=("train", "valid", "test"))
    assert rf100vl_builder("bare", tmp_path / "data", progress=False).metadata["license"] == "CC BY 4.0; MIT"
    edit(export, lambda data: data.update(licenses=[{"id": 1, "name": "MIT\x1b[2J"}]), folders=("train", "valid", "test"))
    with pytest.raises(DataError, match=r"_annotations\.coco\.json: licenses\[0\]\.name: .MIT\\x1b\[2J. contains \\x1b"):
        rf100vl_builder("bare", tmp_path / "data", progress=False)
