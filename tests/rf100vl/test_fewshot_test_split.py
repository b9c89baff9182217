"""The few-shot export's own test split (RF100-VL issue #31): a few-shot workspace's test split
can hold other images than the full export's, and its classes other names. ``test_source``
scores on it; a class name the full export lacks stops the build unless
``fewshot_class_match="id"`` maps it, by category id, with a warning listing every pair."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.rf100vl.builder import FewShotClassWarning, ParameterError, load_rf100vl, rf100vl_builder
from rf100vl_hf.rf100vl.splits import FewShotWarning

from tests.rf100vl.exports import copy_export, load, save

NAME = "bottles"  # a custom export: no catalogue entry needed


def fsod_export(sample_root: Path, tmp_path: Path, renamed: dict[str, str] | None = None) -> tuple[Path, Path]:
    """A full export and a few-shot export of it whose test split is other images (two of the
    full test split's, two of its train split's) and whose classes may be ``renamed``."""
    full = copy_export(sample_root / "sample", tmp_path / "full" / NAME, link_images=True)
    fsod = tmp_path / "fsod" / NAME
    renamed = renamed or {}
    for folder, picks in (("train", [("train", slice(0, 5))]),
                          ("test", [("test", slice(-2, None)), ("train", slice(-2, None))])):
        (fsod / folder).mkdir(parents=True)
        images, annotations, categories = [], [], []
        for source, chosen in picks:
            data = load(full, source)
            categories = [dict(c, name=renamed.get(c["name"], c["name"])) for c in data["categories"]]
            for image in data["images"][chosen]:
                images.append(dict(image, id=len(images) + 1000))
                (fsod / folder / image["file_name"]).hardlink_to((full / source / image["file_name"]).resolve())
                annotations += [dict(a, image_id=images[-1]["id"], id=len(annotations) + n) for n, a in
                                enumerate(a for a in data["annotations"] if a["image_id"] == image["id"])]
        save(fsod, folder, {"images": images, "annotations": annotations, "categories": categories})
    return full, fsod


def prepare(full: Path, fsod: Path | None, tmp_path: Path, **config: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FewShotWarning)
        return load_rf100vl(NAME, data_dir=full.parent, fewshot_dir=fsod.parent if fsod else tmp_path / "none",
                            cache_dir=tmp_path / "cache", progress=False, **config)


def labelled(split) -> list[tuple[str, list[str]]]:
    names = split.features["objects"]["category"].feature.names
    return [(file_name, [names[c] for c in objects["category"]])
            for file_name, objects in zip(split["file_name"], split["objects"])]


def expected(fsod: Path, folder: str, renamed: dict[str, str] | None = None) -> list[tuple[str, list[str]]]:
    """The few-shot export's split straight from its file, named as the full export names them."""
    back = {new: old for old, new in (renamed or {}).items()}
    data = load(fsod, folder)
    names = {c["id"]: back.get(c["name"], c["name"]) for c in data["categories"]}
    return [(image["file_name"], [names[a["category_id"]] for a in data["annotations"] if a["image_id"] == image["id"]])
            for image in data["images"]]


def test_the_fewshot_exports_test_split_is_scored_on_when_asked(sample_root: Path, tmp_path: Path) -> None:
    full, fsod = fsod_export(sample_root, tmp_path)
    default = prepare(full, fsod, tmp_path)
    assert default["test"]["file_name"] == [image["file_name"] for image in load(full, "test")["images"]]
    assert read_metadata(default)["test"] == {"source": "full", "fingerprint": None}

    chosen = prepare(full, fsod, tmp_path, test_source="fewshot")
    assert labelled(chosen["test"]) == expected(fsod, "test") != labelled(default["test"])
    assert chosen["test"]["image_id"] == [image["id"] for image in load(fsod, "test")["images"]]
    meta = read_metadata(chosen)
    assert meta["test"]["source"] == "fewshot" and meta["test"]["fingerprint"] == meta["fewshot"]["fingerprint"]
    assert labelled(chosen["fewshot_10"]) == expected(fsod, "train")
    assert chosen["train"]["file_name"] == default["train"]["file_name"]  # only test changes
    assert rf100vl_builder(NAME, full.parent, fsod.parent, test_source="fewshot", progress=False).config_id == \
        f"{NAME}-test_source=fewshot"


def test_a_renamed_class_stops_the_build_naming_both_names_and_the_option(sample_root: Path, tmp_path: Path) -> None:
    full, fsod = fsod_export(sample_root, tmp_path, {"circle": "Circle", "square": "box"})
    with pytest.raises(DataError) as caught:
        prepare(full, fsod, tmp_path, test_source="fewshot")
    assert (Path(caught.value.path), caught.value.field) == (fsod / "train" / "_annotations.coco.json", "categories")
    message = str(caught.value)
    assert "'Circle' (id 1), where the full export's category 1 is 'circle'" in message
    assert "'box' (id 2), where the full export's category 2 is 'square'" in message
    assert "fewshot_class_match='id'" in message and "--rf100vl-data-option=fewshot-class-match=id" in message
    assert "rf100vl-hf prepare --option fewshot-class-match=id" in message


def test_matched_by_id_a_renamed_class_maps_with_a_warning_listing_the_pairs(sample_root: Path, tmp_path: Path) -> None:
    renamed = {"circle": "Circle", "square": "box"}
    full, fsod = fsod_export(sample_root, tmp_path, renamed)
    with pytest.warns(FewShotClassWarning, match=r"2 name\(s\) differ.*'Circle' -> 'circle'; 'box' -> 'square'"):
        chosen = prepare(full, fsod, tmp_path, test_source="fewshot", fewshot_class_match="id")
    assert chosen["test"].features["objects"]["category"].feature.names == ["circle", "square", "triangle"]
    assert labelled(chosen["test"]) == expected(fsod, "test", renamed)
    assert labelled(chosen["fewshot_10"]) == expected(fsod, "train", renamed)
    meta = read_metadata(chosen)
    assert meta["fewshot"]["class_match"] == "id" and meta["fewshot"]["renamed"] == {"Circle": "circle",
                                                                                      "box": "square"}


def test_split_parameters_tell_the_fewshot_test_split_apart(sample_root: Path, tmp_path: Path) -> None:
    import json

    from pytest_rf100vl.kinds.rf100vl.identity import split_parameters

    full, fsod = fsod_export(sample_root, tmp_path, {"circle": "Circle"})
    with pytest.warns(FewShotClassWarning):
        meta = read_metadata(prepare(full, fsod, tmp_path, test_source="fewshot", fewshot_class_match="id"))
    assert json.loads(split_parameters(meta, "test", "names")) == {
        "test_source": "fewshot", "test_fingerprint": meta["fewshot"]["fingerprint"], "class_match": "id",
        "renamed": {"Circle": "circle"}}
    default, _ = fsod_export(sample_root, tmp_path / "plain")
    assert split_parameters(read_metadata(prepare(default, None, tmp_path / "plain")), "test", "names") == "{}"


def test_what_cannot_be_done_is_an_error_naming_the_option(sample_root: Path, tmp_path: Path) -> None:
    full, fsod = fsod_export(sample_root, tmp_path)
    with pytest.raises(DataError, match="test_source='fewshot'.*no few-shot export of it was found.*--fewshot-dir"):
        prepare(full, None, tmp_path, test_source="fewshot")
    (fsod / "test" / "_annotations.coco.json").unlink()
    with pytest.raises(DataError, match="test_source='fewshot'.*has none"):
        prepare(full, fsod, tmp_path, test_source="fewshot")
    with pytest.raises(ParameterError, match="test_source must be 'full' or 'fewshot', not 'valid'"):
        prepare(full, fsod, tmp_path, test_source="valid")
    with pytest.raises(ParameterError, match="fewshot_class_match must be 'name' or 'id', not 'order'"):
        prepare(full, fsod, tmp_path, fewshot_class_match="order")


def test_prepare_takes_both_options(sample_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rf100vl_hf.cli import main

    full, fsod = fsod_export(sample_root, tmp_path, {"circle": "Circle"})
    args = ["prepare", NAME, "--data-dir", str(full.parent), "--fewshot-dir", str(fsod.parent), "--cache-dir",
            str(tmp_path / "cache"), "--option", "test-source=fewshot"]
    assert main(args) == 2
    assert "'Circle' (id 1), where the full export's category 1 is 'circle'" in capsys.readouterr().err
    assert main([*args, "--option", "fewshot-class-match=id"]) == 0
    out, err = capsys.readouterr()
    assert "test (4)" in out and "rf100vl-hf: warning: bottles: the few-shot export's classes are matched" in err
    assert "'Circle' -> 'circle'" in err
