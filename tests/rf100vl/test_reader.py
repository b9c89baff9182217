"""The export reader: the three category-0 layouts, normalisation, EXIF, every bad input."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from PIL import Image, ImageOps

from rf100vl_hf.errors import DataError
from rf100vl_hf.rf100vl.builder import load_rf100vl
from rf100vl_hf.rf100vl.reader import REPAIRS, Export, RepairWarning, read_export
from rf100vl_hf.sample import EXIF_INDEX, SIZE

from tests.rf100vl.exports import annotation_file, copy_export, edit, load, save


def read(root: Path) -> Export:
    return read_export(root, progress=False)


@pytest.fixture
def shapes(sample_root: Path, tmp_path: Path) -> Path:
    """A writable copy of the generated sample export."""
    return copy_export(sample_root / "sample", tmp_path / "data" / "shapes")


# ------------------------------------------------------------------ layouts


def _cleaned(data: dict) -> None:
    """What the rf100vl package's clean_coco_dataset does: drop category 0, shift ids down by one."""
    data["categories"] = [{**c, "id": c["id"] - 1} for c in data["categories"] if c["id"] != 0]
    for ann in data["annotations"]:
        ann["category_id"] -= 1


def _mmdetection(data: dict) -> None:
    """A "COCO for MMDetection" export: no category 0 and no supercategory key."""
    data["categories"] = [{"id": c["id"], "name": c["name"]} for c in data["categories"] if c["id"] != 0]


def _boxes_by_file(export: Export) -> dict[tuple[str, str], list[tuple[str, list[float]]]]:
    return {
        (split, image.file_name): [(export.classes[a.category], a.bbox) for a in image.annotations]
        for split, content in export.splits.items()
        for image in content.images
    }


def test_three_category_0_layouts_give_the_same_classes_and_boxes(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "microcontroller"
    raw_categories = load(source)["categories"]
    expected = [c["name"] for c in sorted(raw_categories, key=lambda c: c["id"]) if c["id"] != 0]
    raw = read(copy_export(source, tmp_path / "raw", link_images=True))
    variants = {}
    for layout, change in (("rf100vl-cleaned", _cleaned), ("mmdetection", _mmdetection)):
        root = copy_export(source, tmp_path / layout, link_images=True)
        edit(root, change, folders=("train", "valid", "test"))
        variants[layout] = read(root)

    assert (raw.layout, raw.supercategory, raw.classes) == ("roboflow", "microcontroller", expected)
    assert raw.category_ids == [1, 2, 3, 4, 5]
    assert variants["rf100vl-cleaned"].category_ids == [0, 1, 2, 3, 4]
    assert variants["mmdetection"].category_ids == [1, 2, 3, 4, 5]
    for layout, export in variants.items():
        assert (export.layout, export.supercategory, export.classes) == (layout, None, expected)
        assert _boxes_by_file(export) == _boxes_by_file(raw)
    assert sum(len(boxes) for boxes in _boxes_by_file(raw).values()) == sum(
        len(load(source, folder)["annotations"]) for folder in ("train", "valid", "test")
    )


def test_a_category_0_that_no_category_names_as_supercategory_is_a_class(shared_data: Path, tmp_path: Path) -> None:
    root = copy_export(shared_data / "microcontroller", tmp_path / "boards", link_images=True)

    def unrelated_supercategories(data: dict) -> None:
        for category in data["categories"]:
            category["supercategory"] = "none"

    edit(root, unrelated_supercategories, folders=("train", "valid", "test"))
    export = read(root)
    assert export.layout == "rf100vl-cleaned"
    assert export.classes[0] == "microcontroller"


def test_annotation_ids_are_renumbered_from_1_in_file_order(shared_data: Path) -> None:
    export = read(shared_data / "microcontroller")
    anns = load(shared_data / "microcontroller", "train")["annotations"]
    assert anns[0]["id"] == 0  # the raw export numbers from 0, which pycocotools would miscount
    read_back = sorted((a for image in export.splits["train"].images for a in image.annotations), key=lambda a: a.id)
    assert [a.id for a in read_back] == list(range(1, len(anns) + 1))
    assert [a.source_id for a in read_back] == [a["id"] for a in anns]


def test_images_without_boxes_are_kept(shared_data: Path) -> None:
    data = load(shared_data / "chess-pieces", "test")
    boxed = {a["image_id"] for a in data["annotations"]}
    empty = [image["file_name"] for image in data["images"] if image["id"] not in boxed]
    assert empty, "chess-pieces/test is documented to have an image with no boxes"
    export = read(shared_data / "chess-pieces")
    read_back = {image.file_name: image for image in export.splits["test"].images}
    assert len(read_back) == len(data["images"])
    assert all(read_back[name].annotations == [] for name in empty)


def test_zero_width_and_zero_height_boxes_are_kept_and_counted(shared_data: Path, tmp_path: Path) -> None:
    root = copy_export(shared_data / "microcontroller", tmp_path / "boards", link_images=True)

    def flatten(data: dict) -> None:
        data["annotations"][0]["bbox"][2] = 0
        data["annotations"][1]["bbox"][3] = 0

    edit(root, flatten)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RepairWarning)
        export = read(root)
    assert export.splits["train"].zero_area_boxes == 2
    assert export.splits["test"].zero_area_boxes == 0
    boxes = {a.id: a.bbox for image in export.splits["train"].images for a in image.annotations}
    assert boxes[1][2] == 0 and boxes[2][3] == 0


def test_integer_and_float_boxes_are_kept_exactly(shared_data: Path) -> None:
    export = read(shared_data / "microcontroller")
    anns = load(shared_data / "microcontroller", "train")["annotations"]
    boxes = {a.id: a.bbox for image in export.splits["train"].images for a in image.annotations}
    assert [boxes[i + 1] for i in range(len(anns))] == [a["bbox"] for a in anns]


# ---------------------------------------------------------------- bad input


def _set(folder: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    return lambda root: edit(root, change, folders=(folder,))


def _write_json(text: bytes) -> Callable[[Path], None]:
    return lambda root: annotation_file(root).write_bytes(text)


def _image_path(root: Path, index: int, folder: str = "train") -> Path:
    return root / folder / load(root, folder)["images"][index]["file_name"]


def _folder_instead(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _rename(index: int, file_name: str) -> Callable[[Path], None]:
    return _set("train", lambda d: d["images"][index].update(file_name=file_name))


def _first_box_on(image: int, box: list[float]) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        next(a for a in data["annotations"] if a["image_id"] == image)["bbox"] = box

    return change


def _first_ann_index(root: Path, image: int) -> int:
    return next(i for i, a in enumerate(load(root)["annotations"]) if a["image_id"] == image)


TRAIN_JSON = "train/_annotations.coco.json"
BAD_INPUTS: dict[str, tuple[Callable[[Path], None], str, str | Callable[[Path], str], str]] = {
    # name: (make it bad, file at fault (relative), field (or a function of the root), words of the message)
    "unparseable JSON": (_write_json(b'{"images": [1, 2'), TRAIN_JSON, "json", "line 1"),
    "JSON that is not UTF-8": (_write_json(b'{"images": "\xff\xfe"}'), TRAIN_JSON, "json", "UTF-8"),
    "JSON without annotations": (_set("train", lambda d: d.pop("annotations")), TRAIN_JSON, "annotations", "missing"),
    "missing image file": (
        lambda root: _image_path(root, 3).unlink(),
        TRAIN_JSON,
        "images[3].file_name",
        "not found",
    ),
    "image that is a folder": (
        lambda root: _folder_instead(_image_path(root, 3)),
        TRAIN_JSON,
        "images[3].file_name",
        "cannot be read",
    ),
    "file_name going up": (_rename(0, "../valid/x.jpg"), TRAIN_JSON, "images[0].file_name", "escapes"),
    "file_name going up after a folder": (_rename(0, "a/../../x.jpg"), TRAIN_JSON, "images[0].file_name", "escapes"),
    "absolute file_name": (_rename(0, "/etc/hostname"), TRAIN_JSON, "images[0].file_name", "escapes"),
    "Windows file_name going up": (_rename(0, "..\\x.jpg"), TRAIN_JSON, "images[0].file_name", "escapes"),
    "Windows drive file_name": (_rename(0, "C:\\x.jpg"), TRAIN_JSON, "images[0].file_name", "escapes"),
    "box outside the image": (
        _set("train", _first_box_on(0, [SIZE[0] + 5, 10, 20, 20])),
        TRAIN_JSON,
        lambda root: f"annotations[{_first_ann_index(root, 0)}].bbox",
        "outside",
    ),
    "box with negative width": (
        _set("train", _first_box_on(0, [10, 10, -4, 20])),
        TRAIN_JSON,
        lambda root: f"annotations[{_first_ann_index(root, 0)}].bbox",
        "negative",
    ),
    "box with NaN": (
        _set("train", _first_box_on(0, [10, 10, math.nan, 20])),
        TRAIN_JSON,
        lambda root: f"annotations[{_first_ann_index(root, 0)}].bbox",
        "finite",
    ),
    "unknown category id": (
        _set("train", lambda d: d["annotations"][0].update(category_id=99)),
        TRAIN_JSON,
        "annotations[0].category_id",
        "99 is not a class id",
    ),
    "box on the dataset-level category 0": (
        _set("train", lambda d: d["annotations"][0].update(category_id=0)),
        TRAIN_JSON,
        "annotations[0].category_id",
        "supercategory",
    ),
    "unknown image id": (
        _set("train", lambda d: d["annotations"][0].update(image_id=999)),
        TRAIN_JSON,
        "annotations[0].image_id",
        "999",
    ),
    "duplicate image id": (
        _set("train", lambda d: d["images"][1].update(id=d["images"][0]["id"])),
        TRAIN_JSON,
        "images[1].id",
        "duplicate",
    ),
    "duplicate category id": (
        _set("train", lambda d: d["categories"][2].update(id=d["categories"][1]["id"])),
        TRAIN_JSON,
        "categories[2].id",
        "duplicate",
    ),
    "duplicate class name": (
        lambda root: edit(
            root,
            lambda d: d["categories"][2].update(name=d["categories"][1]["name"]),
            folders=("train", "valid", "test"),
        ),
        TRAIN_JSON,
        "categories",
        "used by ids 1 and 2",
    ),
    "categories that differ between splits": (
        _set("valid", lambda d: d["categories"][1].update(name="disc")),
        "valid/_annotations.coco.json",
        "categories",
        "differ",
    ),
    "non-integer image id": (
        _set("train", lambda d: d["images"][0].update(id="a")),
        TRAIN_JSON,
        "images[0].id",
        "integer",
    ),
    "size that disagrees with the file": (
        _set("train", lambda d: d["images"][0].update(width=SIZE[0] + 1)),
        TRAIN_JSON,
        "images[0].width/height",
        "disagrees",
    ),
    "negative area": (
        _set("train", lambda d: d["annotations"][0].update(area=-1)),
        TRAIN_JSON,
        "annotations[0].area",
        "non-negative",
    ),
    "iscrowd that is not 0 or 1": (
        _set("train", lambda d: d["annotations"][0].update(iscrowd=2)),
        TRAIN_JSON,
        "annotations[0].iscrowd",
        "0 or 1",
    ),
    "empty split": (
        _set("test", lambda d: d.update(images=[], annotations=[])),
        "test/_annotations.coco.json",
        "images",
        "empty",
    ),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_names_the_file_and_the_field(name: str, shapes: Path) -> None:
    make_bad, at_fault, field, words = BAD_INPUTS[name]
    field = field(shapes) if callable(field) else field
    make_bad(shapes)
    with pytest.raises(DataError) as caught:
        read(shapes)
    error = caught.value
    assert (Path(error.path), error.field) == (shapes / at_fault, field)
    assert str(error).startswith(f"{shapes / at_fault}: {field}: ")
    assert words in str(error)


@pytest.mark.parametrize("damage", ["truncated", "undecodable"])
@pytest.mark.parametrize("index", [0, 1], ids=["jpeg", "png"])
def test_a_damaged_image_is_named(damage: str, index: int, shapes: Path) -> None:
    path = _image_path(shapes, index)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"this is not an image")
    with pytest.raises(DataError) as caught:
        read(shapes)
    assert (Path(caught.value.path), caught.value.field) == (path, "image")
    assert str(path) in str(caught.value) and "cannot be decoded" in str(caught.value)


def test_missing_split_folders_and_unknown_verify_modes_are_refused(tmp_path: Path, shapes: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no split folder"):
        read(tmp_path / "empty")
    with pytest.raises(DataError, match="not found"):
        read(tmp_path / "absent")
    with pytest.raises(ValueError, match="verify_images"):
        read_export(shapes, verify_images="quick", progress=False)  # type: ignore[arg-type]


# ------------------------------------------------------------------ repairs


def _stored_frame(data: dict) -> None:
    """Describe the EXIF-turned sample image (stored turned 90 degrees counter-clockwise) as stored."""
    image = data["images"][EXIF_INDEX]
    image.update(width=image["height"], height=image["width"])
    for ann in data["annotations"]:
        if ann["image_id"] == image["id"]:
            x, y, w, h = ann["bbox"]
            ann["bbox"] = [y, SIZE[0] - x - w, h, w]


def _displayed_boxes(export: Export) -> list[list[float]]:
    return [a.bbox for a in export.splits["train"].images[EXIF_INDEX].annotations]


REPAIR_CASES: dict[str, tuple[Callable[[Path], None], Callable[[Export, dict], bool]]] = {
    # kind: (make it need the repair, check the repaired export against the original train JSON)
    "box-clipped": (
        _set("train", _first_box_on(0, [300, 200, 40, 60])),
        lambda e, d: [300, 200, 20, 40] in [a.bbox for a in e.splits["train"].images[0].annotations],
    ),
    "size-from-file": (
        _set("train", lambda d: [d["images"][0].pop(key) for key in ("width", "height")]),
        lambda e, d: (e.splits["train"].images[0].width, e.splits["train"].images[0].height) == SIZE,
    ),
    "exif-rotated": (
        _set("train", _stored_frame),
        lambda e, d: _displayed_boxes(e) == [a["bbox"] for a in d["annotations"] if a["image_id"] == EXIF_INDEX],
    ),
    "area-from-box": (
        _set("train", lambda d: d["annotations"][0].pop("area")),
        lambda e, d: next(
            a.area == a.bbox[2] * a.bbox[3] for i in e.splits["train"].images for a in i.annotations if a.id == 1
        ),
    ),
    "duplicate-annotation-id": (
        _set("train", lambda d: d["annotations"][1].update(id=d["annotations"][0]["id"])),
        lambda e, d: sorted(a.id for i in e.splits["train"].images for a in i.annotations)[:2] == [1, 2],
    ),
    "iscrowd-default": (
        _set("train", lambda d: d["annotations"][0].pop("iscrowd")),
        lambda e, d: all(a.iscrowd == 0 for i in e.splits["train"].images for a in i.annotations),
    ),
    "id-from-float": (
        _set("train", lambda d: d["images"][0].update(id=float(d["images"][0]["id"]))),
        lambda e, d: type(e.splits["train"].images[0].image_id) is int
        and e.splits["train"].images[0].image_id == d["images"][0]["id"]
        and len(e.splits["train"].images[0].annotations)
        == sum(a["image_id"] == d["images"][0]["id"] for a in d["annotations"]) > 0,
    ),
}


def test_every_documented_repair_is_tested() -> None:
    assert set(REPAIR_CASES) == set(REPAIRS)


@pytest.mark.parametrize("kind", list(REPAIR_CASES))
def test_a_repair_is_applied_with_a_warning_that_names_the_file(kind: str, shapes: Path) -> None:
    make_repairable, repaired = REPAIR_CASES[kind]
    original = load(shapes)
    make_repairable(shapes)
    with pytest.warns(RepairWarning) as caught:
        export = read(shapes)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert messages[0].startswith(f"{annotation_file(shapes)}: repaired 1 x {kind}: {REPAIRS[kind]}")
    assert export.splits["train"].repairs == {kind: 1}
    assert repaired(export, original)


# --------------------------------------------------------------------- EXIF

DISPLAY = (96, 64)
RECT = (20, 10, 50, 34)  # x0, y0, x1, y1 in the displayed frame
UNDO = {  # the transpose that stores a displayed image so that EXIF orientation o shows it upright
    1: None,
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


def _red_box(pixels: np.ndarray) -> tuple[int, int, int, int]:
    """The xyxy extent of the red pixels (exclusive end)."""
    red = (pixels[..., 0] > 150) & (pixels[..., 1] < 100) & (pixels[..., 2] < 100)
    ys, xs = np.nonzero(red)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def _write_oriented_export(root: Path, orientations: list[int], frame: str) -> None:
    """One image per orientation; the JSON describes the ``displayed`` or the ``stored`` frame."""
    folder = root / "train"
    folder.mkdir(parents=True)
    shown = Image.new("RGB", DISPLAY, (128, 128, 128))
    shown.paste((220, 20, 20), RECT)
    images, annotations = [], []
    for i, orientation in enumerate(orientations):
        stored = shown if UNDO[orientation] is None else shown.transpose(UNDO[orientation])
        exif = Image.Exif()
        exif[0x0112] = orientation
        name = f"orientation_{orientation}.jpg"
        stored.save(folder / name, quality=95, exif=exif.tobytes())
        with Image.open(folder / name) as check:  # PIL's own view of the file: the displayed frame
            assert ImageOps.exif_transpose(check).size == DISPLAY
        x0, y0, x1, y1 = RECT if frame == "displayed" else _red_box(np.asarray(stored))
        width, height = DISPLAY if frame == "displayed" else stored.size
        images.append({"id": i, "file_name": name, "width": width, "height": height})
        annotations.append(
            {"id": i, "image_id": i, "category_id": 1, "bbox": [x0, y0, x1 - x0, y1 - y0], "area": 1, "iscrowd": 0}
        )
    categories = [{"id": 1, "name": "red"}, {"id": 2, "name": "blue"}]
    save(root, "train", {"images": images, "annotations": annotations, "categories": categories})


@pytest.mark.parametrize(
    "frame, orientations", [("displayed", list(range(1, 9))), ("stored", [5, 6, 7, 8])], ids=["displayed", "stored"]
)
def test_decoded_pixels_fall_inside_the_dataset_box_for_every_orientation(
    frame: str, orientations: list[int], tmp_path: Path
) -> None:
    name = f"oriented-{frame}"
    _write_oriented_export(tmp_path / name, orientations, frame)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load_rf100vl(name, split="train", data_dir=tmp_path, cache_dir=tmp_path / "cache", progress=False)
    repairs = [str(w.message) for w in caught if issubclass(w.category, RepairWarning)]
    if frame == "displayed":
        assert repairs == []
    else:
        assert len(repairs) == 1 and f"repaired {len(orientations)} x exif-rotated" in repairs[0]
    assert len(ds) == len(orientations)
    for row in ds:
        pixels = np.asarray(row["image"].convert("RGB"))
        assert (row["width"], row["height"]) == row["image"].size == DISPLAY
        (x, y, w, h), = row["objects"]["bbox"]
        px0, py0, px1, py1 = _red_box(pixels)
        assert x - 1 <= px0 and y - 1 <= py0 and px1 <= x + w + 1 and py1 <= y + h + 1, row["file_name"]
        assert (px1 - px0) * (py1 - py0) >= 0.9 * w * h, row["file_name"]
