"""Reading cut-out sources: names, masks, haze, duplicates, licences, and errors that name the file and field."""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.errors import DataError
from rf100vl_hf.uouo.defaults import DEFAULT_ALPHA_THRESHOLD
from rf100vl_hf.uouo.licence import Licence
from rf100vl_hf.uouo.sample import CATEGORIES, IMAGES_PER_CATEGORY, write_sample_source
from rf100vl_hf.uouo.sources import (
    MIN_ALPHA_PIXELS,
    MIN_ALPHA_SIDE,
    DuplicateCutoutWarning,
    HazeWarning,
    SkippedFileWarning,
    cutout_crop,
    read_source,
)

from tests.support.deadline import within


def test_manifest_items_give_display_names(iotkits: Path) -> None:
    manifest = json.loads((iotkits / "manifest.json").read_text())
    source = read_source(iotkits, progress=False)
    assert source.categories == sorted(manifest["categories"])
    assert sum(len(v) for v in source.items.values()) == len(manifest["items"])
    jetson = source.items["Jetson Nano"][0]
    assert jetson.source_id == "cutouts/jetson-nano/jetson-nano_01.png"
    alpha = np.asarray(Image.open(jetson.path))[..., 3]
    rows, cols = np.nonzero(alpha)
    assert jetson.alpha_box == (cols.min(), rows.min(), cols.max() + 1, rows.max() + 1)


def test_folder_names_without_manifest(cutouts_copy: Path) -> None:
    source = read_source(cutouts_copy, progress=False)
    assert "jetson-nano" in source.categories and len(source.categories) == 10
    assert all(len(items) == 5 for items in source.items.values())


def test_manifest_maps_folders(cutouts_copy: Path) -> None:
    (cutouts_copy / "manifest.json").write_text(json.dumps({"categories": {"telosb": "TelosB mote"}}))
    source = read_source(cutouts_copy, progress=False)
    assert "TelosB mote" in source.categories and "telosb" not in source.categories


def test_fingerprint_follows_content(cutouts_copy: Path) -> None:
    before = read_source(cutouts_copy, progress=False).fingerprint
    assert read_source(cutouts_copy, progress=False).fingerprint == before
    path = cutouts_copy / "wemos" / "wemos_01.png"
    image = Image.open(path)
    image.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(path)
    assert read_source(cutouts_copy, progress=False).fingerprint != before


def test_image_and_mask_pairs(tmp_path: Path) -> None:
    root = write_sample_source(tmp_path / "src")
    folder = root / "star"
    for png in sorted(folder.glob("*.png")):
        rgba = Image.open(png)
        rgba.convert("RGB").save(png.with_suffix(".jpg"), quality=95)
        rgba.getchannel("A").save(folder / f"{png.stem}.mask.png")
        png.unlink()
    source = read_source(root, progress=False)
    star = source.items["star"][0]
    assert star.path.suffix == ".jpg" and star.mask_path is not None and star.mask_path.name.endswith(".mask.png")
    assert len(source.items["star"]) == IMAGES_PER_CATEGORY and len(source.categories) == len(CATEGORIES)


def _write(path: Path, image: Image.Image) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def test_opaque_image_without_mask(cutouts_copy: Path) -> None:
    bad = _write(cutouts_copy / "wemos" / "opaque.jpg", Image.new("RGB", (64, 64), (10, 200, 30)))
    with pytest.raises(DataError, match="opaque") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(bad.resolve()) and error.value.field == "alpha"


def test_rgba_with_full_alpha_is_opaque(cutouts_copy: Path) -> None:
    bad = _write(cutouts_copy / "wemos" / "full.png", Image.new("RGBA", (64, 64), (1, 2, 3, 255)))
    with pytest.raises(DataError, match="opaque") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(bad.resolve())


def test_empty_alpha(cutouts_copy: Path) -> None:
    bad = _write(cutouts_copy / "wemos" / "empty.png", Image.new("RGBA", (64, 64), (1, 2, 3, 0)))
    with pytest.raises(DataError, match="empty") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(bad.resolve())


def test_tiny_alpha(cutouts_copy: Path) -> None:
    image = Image.new("RGBA", (64, 64), (1, 2, 3, 0))
    image.paste((200, 0, 0, 255), (10, 10, 10 + MIN_ALPHA_SIDE - 1, 50))  # one pixel too narrow
    bad = _write(cutouts_copy / "wemos" / "tiny.png", image)
    with pytest.raises(DataError, match="too small") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(bad.resolve())
    sparse = Image.new("RGBA", (64, 64), (1, 2, 3, 0))
    for i in range(0, 60, 4):  # a wide box, but few pixels
        sparse.putpixel((i, i), (9, 9, 9, 255))
    bad.unlink()
    _write(cutouts_copy / "wemos" / "sparse.png", sparse)
    with pytest.raises(DataError, match=f"{MIN_ALPHA_PIXELS} pixels"):
        read_source(cutouts_copy, progress=False)


def test_mask_of_another_size(cutouts_copy: Path) -> None:
    _write(cutouts_copy / "wemos" / "board.jpg", Image.new("RGB", (64, 48), (50, 50, 50)))
    mask = _write(cutouts_copy / "wemos" / "board.mask.png", Image.new("L", (48, 64), 255))
    with pytest.raises(DataError, match="48x64") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(mask.resolve()) and error.value.field == "size"


def test_mask_without_image(cutouts_copy: Path) -> None:
    mask = _write(cutouts_copy / "wemos" / "ghost.mask.png", Image.new("L", (48, 48), 255))
    with pytest.raises(DataError, match="no image") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(mask.resolve())


def test_too_few_images(cutouts_copy: Path) -> None:
    for path in sorted((cutouts_copy / "esp8266").iterdir())[1:]:
        path.unlink()
    with pytest.raises(DataError, match="'esp8266' has 1 images; at least 2") as error:
        read_source(cutouts_copy, progress=False)
    assert "esp8266" in error.value.path
    assert len(read_source(cutouts_copy, min_images=1, progress=False).items["esp8266"]) == 1


def test_too_few_categories(tmp_path: Path, cutouts_copy: Path) -> None:
    root = tmp_path / "three"
    root.mkdir()
    for name in ("esp8266", "wemos", "telosb"):
        (cutouts_copy / name).rename(root / name)
    with pytest.raises(DataError, match="3 categories; a mosaic needs 4") as error:
        read_source(root, progress=False)
    assert error.value.path == str(root)


def test_manifest_path_escaping_the_root(cutouts_copy: Path, tmp_path: Path) -> None:
    outside = _write(tmp_path / "outside.png", Image.open(cutouts_copy / "wemos" / "wemos_01.png"))
    items = [{"cutout": f"{name}/{name}_0{i}.png", "category": name} for name in ("esp8266", "wemos", "telosb", "jetson-nano")
             for i in (1, 2)]
    items.append({"cutout": "../outside.png", "category": "wemos"})
    manifest = cutouts_copy / "manifest.json"
    manifest.write_text(json.dumps({"items": items}))
    with pytest.raises(DataError, match="leads outside") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(manifest) and error.value.field == "items[8].cutout"
    assert outside.is_file()


def test_a_cutout_linked_from_outside_the_root_is_read(cutouts_copy: Path, tmp_path: Path) -> None:
    outside = _write(tmp_path / "elsewhere" / "board.png", Image.open(cutouts_copy / "wemos" / "wemos_01.png"))
    os.symlink(outside, cutouts_copy / "wemos" / "linked.png")
    wemos = read_source(cutouts_copy, progress=False).items["wemos"]
    assert "wemos/linked.png" in [cutout.source_id for cutout in wemos]


@pytest.mark.parametrize(("target", "words"), [
    ("text", "no image format recognises it"),
    ("folder", "is a directory, not a file"),
    ("/dev/zero", "is a character device"),
    ("/proc/self/mem", "cannot be read (Input/output error)"),
])
def test_a_cutout_linking_to_what_is_not_an_image_is_an_error_naming_it(tmp_path: Path, target: str,
                                                                         words: str) -> None:
    root = write_sample_source(tmp_path / "source")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("not an image\n" * 20)
    linked = {"text": elsewhere / "notes.txt", "folder": elsewhere}.get(target, Path(target))
    category = root / next(iter(CATEGORIES))
    os.symlink(linked, category / "linked.png")
    with pytest.raises(DataError, match=re.escape(words)) as error:
        within(20, lambda: read_source(root, progress=False))
    assert error.value.path == str(category / "linked.png")


def test_non_images_are_skipped_with_a_warning(cutouts_copy: Path) -> None:
    (cutouts_copy / "wemos" / "notes.txt").write_text("taken in 2024")
    with pytest.warns(SkippedFileWarning, match="notes.txt"):
        source = read_source(cutouts_copy, progress=False)
    assert len(source.items["wemos"]) == 5


# -- faint alpha haze, duplicates, manifest types, licences ------------------------------


def _add_haze(path: Path, seed: int = 0, high: int = DEFAULT_ALPHA_THRESHOLD) -> None:
    """Give every transparent pixel alpha 1..``high``, as background removers leave it."""
    rgba = np.array(Image.open(path).convert("RGBA"))
    clear = rgba[..., 3] == 0
    rgba[..., 3][clear] = np.random.default_rng(seed).integers(1, high + 1, size=int(clear.sum()))
    Image.fromarray(rgba, "RGBA").save(path)


def test_faint_haze_is_ignored_and_reported(tmp_path: Path) -> None:
    clean = read_source(write_sample_source(tmp_path / "clean"), progress=False)
    root = write_sample_source(tmp_path / "hazy")
    hazy_file = root / "gear" / "gear_02.png"
    _add_haze(hazy_file)
    with pytest.warns(HazeWarning, match=r"gear_02\.png: alpha: faint alpha covers a (\d+)x\1 box") as caught:
        source = read_source(root, progress=False)
    assert len([w for w in caught if issubclass(w.category, HazeWarning)]) == 1
    assert source.hazy == ["gear/gear_02.png"]
    hazy = source.items["gear"][1]
    assert hazy.alpha_box == clean.items["gear"][1].alpha_box  # the haze does not move the box
    assert hazy.alpha_box != (0, 0, *hazy.size)
    alpha = np.asarray(cutout_crop(hazy).getchannel("A"))
    assert not ((alpha > 0) & (alpha <= DEFAULT_ALPHA_THRESHOLD)).any()  # the haze never reaches a mosaic
    assert source.fingerprint != clean.fingerprint  # other bytes, another source
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # counted as object, the haze is the box: no warning, the whole canvas
        whole = read_source(root, progress=False, alpha_threshold=0)
    assert whole.items["gear"][1].alpha_box == (0, 0, *hazy.size) and whole.hazy == []


def test_haze_above_the_threshold_is_object_until_the_threshold_is_raised(tmp_path: Path) -> None:
    root = write_sample_source(tmp_path / "src")
    _add_haze(root / "star" / "star_01.png", high=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # faint and visible boxes are both the canvas: nothing to tell apart
        star = read_source(root, progress=False).items["star"][0]
    assert star.alpha_box == (0, 0, *star.size)
    with pytest.warns(HazeWarning, match="star_01.png"):
        raised = read_source(root, progress=False, alpha_threshold=20).items["star"][0]
    assert raised.alpha_box != (0, 0, *star.size)


def test_alpha_threshold_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="alpha_threshold must be an integer in 0..254"):
        read_source(write_sample_source(tmp_path / "src"), alpha_threshold=255)


def test_byte_identical_cutouts_are_reported_and_used_once(tmp_path: Path) -> None:
    root = write_sample_source(tmp_path / "src")
    copy = root / "ring" / "ring_99.png"
    shutil.copyfile(root / "ring" / "ring_01.png", copy)
    elsewhere = root / "heart" / "heart_99.png"
    shutil.copyfile(root / "star" / "star_03.png", elsewhere)
    with pytest.warns(DuplicateCutoutWarning) as caught:
        source = read_source(root, progress=False)
    messages = [str(w.message) for w in caught if issubclass(w.category, DuplicateCutoutWarning)]
    star = root / "star" / "star_03.png"  # read after heart/heart_99.png (categories in sorted order)
    assert messages == [f"{copy.resolve()}: bytes: identical to {(root / 'ring' / 'ring_01.png').resolve()}; "
                        "only ring/ring_01.png is used",
                        f"{star.resolve()}: bytes: identical to {elsewhere.resolve()}; only heart/heart_99.png is used"]
    assert source.duplicates == [("ring/ring_99.png", "ring/ring_01.png"), ("star/star_03.png", "heart/heart_99.png")]
    ids = [c.source_id for c in source.cutouts()]
    assert len(ids) == len(CATEGORIES) * IMAGES_PER_CATEGORY and "ring/ring_01.png" in ids and "ring/ring_99.png" not in ids
    assert "heart/heart_99.png" in ids and "star/star_03.png" not in ids


def test_duplicates_do_not_count_towards_min_images(tmp_path: Path) -> None:
    root = write_sample_source(tmp_path / "src")
    for path in sorted((root / "bolt").glob("*.png"))[1:]:
        shutil.copyfile(root / "bolt" / "bolt_01.png", path)
    with pytest.warns(DuplicateCutoutWarning), pytest.raises(DataError, match="'bolt' has 1 images \\(3 duplicates"):
        read_source(root, progress=False)


def _valid_items(root: Path) -> list[dict]:
    return [{"cutout": f"{name}/{name}_0{i}.png", "category": name}
            for name in ("esp8266", "wemos", "telosb", "jetson-nano") for i in (1, 2)]


BAD_MANIFESTS = {
    "category mapped to a number": ({"categories": {"wemos": 5}}, "categories.wemos"),
    "category mapped to an empty name": ({"categories": {"wemos": " "}}, "categories.wemos"),
    "categories a number": ({"categories": 7}, "categories"),
    "items an object": ({"items": {}}, "items"),
    "item a string": ({"items": ["wemos/wemos_01.png"]}, "items[0]"),
    "cutout a number": ({"items": [{"cutout": 3, "category": "Wemos"}]}, "items[0].cutout"),
    "category a number": ({"items": [{"cutout": "wemos/wemos_01.png", "category": 4}]}, "items[0].category"),
    "category missing": ({"items": [{"cutout": "wemos/wemos_01.png"}]}, "items[0].category"),
    "mask a number": ({"items": [{"cutout": "wemos/wemos_01.png", "category": "W", "mask": 1}]}, "items[0].mask"),
    "categories list of numbers": ("items+categories", "categories[0]"),
    "license a number": ({"license": 5}, "license"),
    "not an object": ([], "json"),
    "nested too deeply": ("deep", "json"),
}


@pytest.mark.parametrize("case", list(BAD_MANIFESTS))
def test_manifest_of_the_wrong_type_names_the_field(cutouts_copy: Path, case: str) -> None:
    data, field = BAD_MANIFESTS[case]
    manifest = cutouts_copy / "manifest.json"
    if data == "deep":
        manifest.write_text("[" * 200_000 + "]" * 200_000)
    elif data == "items+categories":
        manifest.write_text(json.dumps({"items": _valid_items(cutouts_copy), "categories": [1]}))
    else:
        manifest.write_text(json.dumps(data))
    with pytest.raises(DataError) as error:
        read_source(cutouts_copy, progress=False)
    assert (error.value.path, error.value.field) == (str(manifest), field), str(error.value)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"manifest.json": '{"license": "CC-BY-4.0"}'}, Licence("cc-by-4.0", "CC-BY-4.0", "manifest.json")),
        ({"manifest.json": '{"license": "Our Lab Licence v2"}'}, Licence("other", "Our Lab Licence v2", "manifest.json")),
        ({"LICENSE": "MIT License\n\nCopyright (c) 2024 someone\n"}, Licence("mit", "MIT License", "LICENSE")),
        ({"README.dataset.txt": "# boards\nProvided by a Roboflow user\nLicense: CC BY 4.0\n"},
         Licence("cc-by-4.0", "CC BY 4.0", "README.dataset.txt")),
        ({}, Licence("unknown", "", "")),
    ],
)
def test_source_licence(tmp_path: Path, files: dict[str, str], expected: Licence) -> None:
    root = write_sample_source(tmp_path / "src")
    (root / "manifest.json").unlink()
    for name, text in files.items():
        (root / name).write_text(text)
    assert read_source(root, progress=False).licence == expected


def test_sample_and_real_licences(iotkits: Path, tmp_path: Path) -> None:
    assert read_source(iotkits, progress=False).licence.id == "cc-by-4.0"  # from its LICENSE.txt
    assert read_source(write_sample_source(tmp_path / "src"), progress=False).licence.id == "apache-2.0"


def test_real_cutouts_with_haze_and_a_duplicate(iotkits: Path, cutouts_copy: Path) -> None:
    """The real cut-outs, two of them given a faint haze and one copied: the haze is reported
    and ignored, the copy is reported and left out, and every box is the object's polygon box."""
    manifest = json.loads((iotkits / "manifest.json").read_text())
    polygon_boxes = {}
    for item in manifest["items"]:  # the polygon's box, in the cut-out's pixels
        (x, y, w, h), (cx, cy, _, _), scale = item["source_bbox_xywh"], item["crop_box_xyxy"], item["scale"]
        polygon_boxes[item["cutout"].removeprefix("cutouts/")] = np.array(
            [(x - cx) * scale, (y - cy) * scale, (x + w - cx) * scale, (y + h - cy) * scale])
    offsets = {}
    for seed, name in enumerate(("wemos/wemos_02.png", "telosb/telosb_04.png")):  # as a render: object amid a canvas
        image = Image.open(cutouts_copy / name)
        canvas = Image.new("RGBA", (image.width * 2, image.height * 2), (0, 0, 0, 0))
        offsets[name] = (image.width // 3, image.height // 2)
        canvas.paste(image, offsets[name])
        canvas.save(cutouts_copy / name)
        _add_haze(cutouts_copy / name, seed=seed)
        polygon_boxes[name] += np.array([*offsets[name], *offsets[name]])
    shutil.copyfile(cutouts_copy / "esp8266" / "esp8266_03.png", cutouts_copy / "esp8266" / "esp8266_09.png")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = read_source(cutouts_copy, progress=False)
    haze = sorted(str(w.message).split(":")[0] for w in caught if issubclass(w.category, HazeWarning))
    assert haze == [str((cutouts_copy / "telosb" / "telosb_04.png").resolve()),
                    str((cutouts_copy / "wemos" / "wemos_02.png").resolve())]
    assert sorted(source.hazy) == ["telosb/telosb_04.png", "wemos/wemos_02.png"]
    duplicate = [str(w.message) for w in caught if issubclass(w.category, DuplicateCutoutWarning)]
    assert len(duplicate) == 1 and "esp8266_09.png" in duplicate[0] and "esp8266_03.png" in duplicate[0]
    assert source.duplicates == [("esp8266/esp8266_09.png", "esp8266/esp8266_03.png")]
    assert len(source.cutouts()) == 50
    for cutout in source.cutouts():
        box = np.array(cutout.alpha_box)
        assert np.abs(box - polygon_boxes[cutout.source_id]).max() <= 2.5, cutout.source_id


# ------------------------------------------------------------ files that are no regular files


def _fifo(path: Path) -> Path:
    """A FIFO at ``path`` (in place of what was there): opening it to read blocks until a writer comes."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def _list_sample_items(root: Path, category: Callable[[str], str] = str) -> list[dict]:
    """Write a manifest listing two cut-outs of four of the sample's categories; return its items."""
    items = [{"cutout": f"{name}/{name}_0{i}.png", "category": category(name)}
             for name in list(CATEGORIES)[:4] for i in (1, 2)]
    (root / "manifest.json").write_text(json.dumps({"items": items}))
    return items


def _listing_a_fifo(root: Path) -> tuple[Path, str]:
    items = _list_sample_items(root)
    _fifo(root / items[0]["cutout"])
    return root / "manifest.json", "items[0].cutout"


def _without_manifest(make: Callable[[Path], Path]) -> Callable[[Path], tuple[Path, str]]:
    """Remove the manifest (which states the licence), then make a FIFO where a licence is looked for."""
    def place(root: Path) -> tuple[Path, str]:
        (root / "manifest.json").unlink()
        return make(root), "file"

    return place


FIFOS: dict[str, Callable[[Path], tuple[Path, str]]] = {  # put a FIFO in the source; return the file and field named
    "cut-out": lambda root: (_fifo(root / "bolt" / "bolt_02.png"), "file"),
    "mask": lambda root: (_fifo(root / "bolt" / "bolt_01.mask.png"), "file"),
    "manifest": lambda root: (_fifo(root / "manifest.json"), "file"),
    "cut-out listed by the manifest": _listing_a_fifo,
    "licence file": _without_manifest(lambda root: _fifo(root / "LICENSE")),
    "README read for a licence": _without_manifest(lambda root: _fifo(root / "README.dataset.txt")),
}


@pytest.mark.parametrize("case", list(FIFOS))
def test_a_fifo_is_refused_by_name_before_it_is_opened(tmp_path: Path, case: str) -> None:
    root = write_sample_source(tmp_path / "src")
    named, field = FIFOS[case](root)
    with pytest.raises(DataError) as error:
        within(20, lambda: read_source(root, progress=False), fifos_under=root)
    assert (error.value.path, error.value.field) == (str(named), field), str(error.value)
    assert "is a FIFO (named pipe), not a regular file" in str(error.value)


# ------------------------------------------------------------ control characters in names

CONTROL_NAMES: dict[str, tuple[Callable[[Path], object], Callable[[Path], tuple[Path, str]]]] = {
    # case: (put the name in the source, the file and field named)
    "category renamed with an ANSI escape": (
        lambda root: (root / "manifest.json").write_text(json.dumps({"categories": {"bolt": "Bolt\x1b[2J"}})),
        lambda root: (root / "manifest.json", "categories.bolt"),
    ),
    "listed category with a right-to-left override": (
        lambda root: _list_sample_items(root, lambda name: f"\u202e{name}"),
        lambda root: (root / "manifest.json", "items[0].category"),
    ),
    "category folder named with an escape": (
        lambda root: (root / "bolt").rename(root / "bo\x1blt"), lambda root: (root, "names")
    ),
    "cut-out named with a bell": (
        lambda root: (root / "bolt" / "bolt_02.png").rename(root / "bolt" / "bolt\x07.png"),
        lambda root: (root / "bolt", "names"),
    ),
}


@pytest.mark.parametrize("case", list(CONTROL_NAMES))
def test_a_name_with_a_control_character_is_refused(tmp_path: Path, case: str) -> None:
    root = write_sample_source(tmp_path / "src")
    make, named = CONTROL_NAMES[case]
    make(root)
    with pytest.raises(DataError) as error:
        read_source(root, progress=False)
    path, field = named(root)
    assert (error.value.path, error.value.field) == (str(path), field), str(error.value)
    assert "which acts on a terminal or a document instead of printing" in str(error.value)
