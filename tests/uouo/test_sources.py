"""Reading cut-out sources: names, masks, and errors that name the file at fault."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.errors import DataError
from rf100vl_hf.uouo.sample import CATEGORIES, IMAGES_PER_CATEGORY, write_sample_source
from rf100vl_hf.uouo.sources import MIN_ALPHA_PIXELS, MIN_ALPHA_SIDE, SkippedFileWarning, read_source


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


def test_symlink_escaping_the_root(cutouts_copy: Path, tmp_path: Path) -> None:
    outside = _write(tmp_path / "elsewhere" / "board.png", Image.open(cutouts_copy / "wemos" / "wemos_01.png"))
    link = cutouts_copy / "wemos" / "linked.png"
    os.symlink(outside, link)
    with pytest.raises(DataError, match="leads outside") as error:
        read_source(cutouts_copy, progress=False)
    assert error.value.path == str(link)


def test_non_images_are_skipped_with_a_warning(cutouts_copy: Path) -> None:
    (cutouts_copy / "wemos" / "notes.txt").write_text("taken in 2024")
    with pytest.warns(SkippedFileWarning, match="notes.txt"):
        source = read_source(cutouts_copy, progress=False)
    assert len(source.items["wemos"]) == 5
