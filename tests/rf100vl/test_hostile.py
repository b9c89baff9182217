"""Hostile RF100-VL exports, one table: every row ends in an error naming the file and the
field, a warning (with the repair counted where it is a repair), or, for the controls,
a clean read. A traceback, a silent acceptance or a hang fails the row.

Each row builds a small bad export from the generated sample and prepares it the way
``rf100vl-hf prepare`` does (constructing the builder reads and validates the export
before anything is written), or lists the data folder the way ``rf100vl-hf list`` does,
under a deadline of :data:`DEADLINE_S` seconds (a row takes a fraction of one).
"""

from __future__ import annotations

import io
import math
import os
import shutil
import struct
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Literal

import numpy as np
import pytest
from PIL import Image

from rf100vl_hf.errors import DataError
from rf100vl_hf.rf100vl.builder import rf100vl_builder
from rf100vl_hf.rf100vl.reader import NotScorableWarning, RepairWarning
from rf100vl_hf.rf100vl.sources import UnusableExportWarning, custom_exports

from tests.rf100vl.exports import annotation_file, copy_export, edit, load
from tests.support.deadline import within

NAME = "shapes"
TRAIN_JSON = "train/_annotations.coco.json"
TEST_JSON = "test/_annotations.coco.json"
OUR_WARNINGS = (RepairWarning, NotScorableWarning, UnusableExportWarning)
DEADLINE_S = 20

Where = str | Callable[[Path], Path]  # relative to the export root, or a function of the root


@dataclass(frozen=True)
class Refused:
    file: Where
    field: str
    words: str


@dataclass(frozen=True)
class Warned:
    category: type[Warning]
    words: str
    repairs: dict[str, dict[str, int]] = field(default_factory=dict)  # split -> counted repairs


@dataclass(frozen=True)
class Accepted:
    """A control: hostile-looking but valid, so it must read cleanly."""


@dataclass(frozen=True)
class Row:
    make: Callable[[Path], str | None]  # damages the export at the root; returns the name to ask for
    outcome: Refused | Warned | Accepted
    verify: Literal["header", "full"] = "header"
    act: Literal["prepare", "list"] = "prepare"


# ------------------------------------------------------------------ helpers


def _outside(root: Path) -> Path:
    """A folder beside the data folder, where links lead out to."""
    folder = root.parent.parent / "elsewhere"
    folder.mkdir(exist_ok=True)
    return folder


def _first(root: Path, suffix: str, folder: str = "train") -> tuple[int, Path]:
    """The place in the JSON and the file of the first image of a split with ``suffix``."""
    images = load(root, folder)["images"]
    index = next(i for i, image in enumerate(images) if image["file_name"].endswith(suffix))
    return index, root / folder / images[index]["file_name"]


def _move_out(path: Path, root: Path) -> None:
    """Move ``path`` outside the data folder and leave a link to it in its place."""
    target = _outside(root) / path.name
    shutil.move(path, target)
    path.symlink_to(target, target_is_directory=target.is_dir())


def _set(change: Callable[[dict], object], folders: tuple[str, ...] = ("train",)) -> Callable[[Path], None]:
    return lambda root: edit(root, change, folders=folders)


def _raw_train_json(text: str) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        annotation_file(root).write_text(text, encoding="utf-8")

    return make


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _replace_image(suffix: str, data: Callable[[], tuple[bytes, tuple[int, int]]]) -> Callable[[Path], None]:
    """Put other bytes (of another size, which the JSON is told) in place of the first image with ``suffix``."""

    def make(root: Path) -> None:
        index, path = _first(root, suffix)
        content, (width, height) = data()
        path.unlink()  # never write through a link into another export
        path.write_bytes(content)
        edit(root, lambda d: d["images"][index].update(width=width, height=height))

    return make


def _zeroed_jpeg() -> tuple[bytes, tuple[int, int]]:
    """A 640x480 JPEG of noise with 4,000 bytes in the middle of its data set to zero."""
    pixels = np.random.default_rng(0).integers(0, 255, (480, 640, 3), np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    data = bytearray(buffer.getvalue())
    middle = len(data) // 2
    data[middle : middle + 4000] = bytes(4000)
    return bytes(data), (640, 480)


def _short_png() -> tuple[bytes, tuple[int, int]]:
    """An 800x600 RGB PNG, well formed chunk by chunk, whose pixel data holds 3 of its 600 rows."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + bytes([90]) * (800 * 3) for _ in range(3))
    header = struct.pack(">IIBBBBB", 800, 600, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return data, (800, 600)


def _rename_export(new: str) -> Callable[[Path], str]:
    def make(root: Path) -> str:
        root.rename(root.parent / new)
        return new

    return make


def _first_image_in_linked_folder(root: Path) -> None:
    _, image = _first(root, ".jpg")
    sub = _outside(root) / "sub"
    sub.mkdir()
    shutil.copyfile(image, sub / image.name)
    (root / "train" / "sub").symlink_to(sub, target_is_directory=True)
    edit(root, lambda d: d["images"][0].update(file_name=f"sub/{d['images'][0]['file_name']}"))


def _export_folder_is_a_link(root: Path) -> None:
    kept = _outside(root) / NAME
    shutil.move(root, kept)
    root.symlink_to(kept, target_is_directory=True)


def _link_to_another_image(root: Path) -> None:
    images = load(root)["images"]
    first, second = (root / "train" / images[i]["file_name"] for i in (0, 1))
    first.unlink()
    first.symlink_to(second.name)
    edit(root, lambda d: d["images"][0].update(width=images[1]["width"], height=images[1]["height"]))


def _relink(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target, target_is_directory=target.is_dir())


def _image_linking_to(target: Callable[[Path], Path]) -> Callable[[Path], None]:
    """Put a link to ``target(root)`` in place of the first JPEG of train."""
    return lambda root: _relink(_first(root, ".jpg")[1], target(root))


def _text_file(root: Path) -> Path:
    path = _outside(root) / "notes.txt"
    path.write_text("not an image\n" * 20, encoding="utf-8")
    return path


def _link_loop(root: Path) -> None:
    _, image = _first(root, ".jpg")
    image.unlink()
    image.symlink_to(image.name)


def _fifo_instead_of(file: Callable[[Path], Path]) -> Callable[[Path], None]:
    """Put a FIFO (which blocks whoever opens it to read) in place of a file of the export."""

    def make(root: Path) -> None:
        path = file(root)
        path.unlink()
        os.mkfifo(path)

    return make


def _readme(name: str, line: int, text: str) -> Callable[[Path], None]:
    """Put ``text`` at the start of line ``line`` of a README."""

    def make(root: Path) -> None:
        path = root / name
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        lines[line - 1] = text + lines[line - 1]
        path.unlink()  # the copy may share the file with the original
        path.write_text("".join(lines), encoding="utf-8")

    return make


def _windows_readme_with_tabs(root: Path) -> None:
    path = root / "README.dataset.txt"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n").replace(b"- ", b"-\t"))


def _same_file_as_first(prefix: str = "") -> Callable[[dict], None]:
    return lambda d: d["images"][1].update(
        file_name=prefix + d["images"][0]["file_name"], width=d["images"][0]["width"], height=d["images"][0]["height"]
    )


def _class_name(name: str) -> Callable[[Path], None]:
    return _set(lambda d: d["categories"][1].update(name=name), ("train", "valid", "test"))


def _image(suffix: str) -> Callable[[Path], Path]:
    return lambda root: _first(root, suffix)[1]


def _data_folder(root: Path) -> Path:
    return root.parent


NOT_UNICODE_CLASS = _set(lambda d: d["categories"][1].update(name="circle\ud800"), ("train", "valid", "test"))

ROWS: dict[str, Row] = {
    # ---- links: an export may link files kept elsewhere; only its paths must stay inside it
    "file_name climbing out of the export": Row(
        _set(lambda d: d["images"][0].update(file_name=f"../../{d['images'][0]['file_name']}")),
        Refused(TRAIN_JSON, "images[0].file_name", "escapes the folder"),
    ),
    "control: image linking outside the export": Row(lambda root: _move_out(_first(root, ".jpg")[1], root), Accepted()),
    "control: image in a sub-folder linking outside": Row(_first_image_in_linked_folder, Accepted()),
    "control: split folder linking outside": Row(lambda root: _move_out(root / "train", root), Accepted()),
    "control: annotation file linking outside": Row(lambda root: _move_out(annotation_file(root), root), Accepted()),
    "control: README linking outside": Row(lambda root: _move_out(root / "README.dataset.txt", root), Accepted()),
    "image that is a link loop": Row(_link_loop, Refused(TRAIN_JSON, "images[0].file_name", "cannot be followed")),
    "control: export folder that is a link": Row(_export_folder_is_a_link, Accepted()),
    "image linking to a text file elsewhere": Row(
        _image_linking_to(lambda root: _text_file(root)), Refused(_image(".jpg"), "image", "no image format recognises it")
    ),
    "image linking to a folder": Row(
        _image_linking_to(lambda root: _outside(root)), Refused(TRAIN_JSON, "images[0].file_name", "cannot be read (Is a directory)")
    ),
    "image linking to /dev/zero": Row(
        _image_linking_to(lambda root: Path("/dev/zero")),
        Refused(TRAIN_JSON, "images[0].file_name", "is a character device"),
    ),
    "image linking to /proc/self/mem": Row(
        _image_linking_to(lambda root: Path("/proc/self/mem")),
        Refused(TRAIN_JSON, "images[0].file_name", "cannot be read (Input/output error)"),
    ),
    "annotation file linking to /proc/self/mem": Row(
        lambda root: _relink(annotation_file(root), Path("/proc/self/mem")),
        Refused(TRAIN_JSON, "file", "cannot be read (Input/output error)"),
    ),
    "annotation file linking to a folder": Row(
        lambda root: _relink(annotation_file(root), _outside(root)), Refused(TRAIN_JSON, "file", "cannot be read (Is a directory)")
    ),
    "control: image linking to another image of the export": Row(_link_to_another_image, Accepted()),
    # ---- JSON the parser or the checks could choke on
    "JSON nested 100,000 deep": Row(
        _raw_train_json('{"images": ' + "[" * 100_000 + "]" * 100_000 + "}"), Refused(TRAIN_JSON, "json", "too deeply")
    ),
    "box nested 200 deep": Row(
        _set(lambda d: d["annotations"][0].update(bbox=_nested(200))),
        Refused(TRAIN_JSON, "annotations[0].bbox", "expected [x, y, w, h], found [[[[...]]]]"),
    ),
    "integer of 5,000 digits": Row(
        _raw_train_json('{"images": [{"id": ' + "9" * 5000 + "}], \"annotations\": [], \"categories\": []}"),
        Refused(TRAIN_JSON, "json", "digits"),
    ),
    "image id beyond 64 bits": Row(
        _set(lambda d: d["images"][0].update(id=2**70)), Refused(TRAIN_JSON, "images[0].id", "64 bits")
    ),
    "image id that is infinite": Row(
        _set(lambda d: d["images"][0].update(id=math.inf)), Refused(TRAIN_JSON, "images[0].id", "integer")
    ),
    "area too large for a float": Row(
        _set(lambda d: d["annotations"][0].update(area=10**400)),
        Refused(TRAIN_JSON, "annotations[0].area", "non-negative number"),
    ),
    # ---- names that are not text
    "file_name with a NUL byte": Row(
        _set(lambda d: d["images"][0].update(file_name="a\x00.jpg")),
        Refused(TRAIN_JSON, "images[0].file_name", "NUL"),
    ),
    "file_name with a lone surrogate": Row(
        _set(lambda d: d["images"][0].update(file_name="a\udc80.jpg")),
        Refused(TRAIN_JSON, "images[0].file_name", "lone surrogate"),
    ),
    "file_name of a megabyte": Row(
        _set(lambda d: d["images"][0].update(file_name="x" * 1_000_000 + ".jpg")),
        Refused(TRAIN_JSON, "images[0].file_name", "cannot be read"),
    ),
    "class name with a lone surrogate": Row(
        NOT_UNICODE_CLASS, Refused(TRAIN_JSON, "categories[1].name", "lone surrogate")
    ),
    # ---- ids: one rule (rf100vl_hf.ids), the metric's and replayed files' too
    "image id given as the string '0'": Row(
        _set(lambda d: d["images"][0].update(id="0")), Refused(TRAIN_JSON, "images[0].id", "a string")
    ),
    "category id given as the string '1'": Row(
        _set(lambda d: d["categories"][1].update(id="1")), Refused(TRAIN_JSON, "categories[1].id", "a string")
    ),
    "image id written as a float": Row(
        _set(lambda d: d["images"][3].update(id=3.0)),
        Warned(RepairWarning, "id-from-float", {"train": {"id-from-float": 1}}),
    ),
    "annotation ids written as floats": Row(
        _set(lambda d: d["annotations"][0].update(image_id=float(d["annotations"][0]["image_id"]), category_id=1.0)),
        Warned(RepairWarning, "2 x id-from-float", {"train": {"id-from-float": 2}}),
    ),
    # ---- one file under two ids: the same pixels would be scored twice
    "two image entries naming one file": Row(
        _set(_same_file_as_first()),
        Refused(TRAIN_JSON, "images[1].file_name", "of image id 1 is also the file of image id 0 (images[0])"),
    ),
    "two image entries naming one file, one of them as ./name": Row(
        _set(_same_file_as_first("./")), Refused(TRAIN_JSON, "images[1].file_name", "is also the file of image id 0")
    ),
    # ---- characters that act instead of printing (rf100vl_hf.controls)
    "class name with an ANSI escape": Row(
        _class_name("circle\x1b[2J\x1b[H"), Refused(TRAIN_JSON, "categories[1].name", "\\x1b (ESC)")
    ),
    "class name with a right-to-left override": Row(
        _class_name("circle\u202egnp.exe"),
        Refused(TRAIN_JSON, "categories[1].name", "\\u202e (RIGHT-TO-LEFT OVERRIDE)"),
    ),
    "class name with a NUL": Row(_class_name("circ\x00le"), Refused(TRAIN_JSON, "categories[1].name", "NUL")),
    "class name with a line break": Row(
        _class_name("circle\nsquare"), Refused(TRAIN_JSON, "categories[1].name", "\\x0a")
    ),
    "file_name with an ANSI escape": Row(
        _set(lambda d: d["images"][0].update(file_name="\x1b]0;owned\x07a.jpg")),
        Refused(TRAIN_JSON, "images[0].file_name", "\\x1b (ESC)"),
    ),
    "annotator instructions with an ANSI escape": Row(
        _readme("README.dataset.txt", 20, "\x1b[31m"), Refused("README.dataset.txt", "text", "\\x1b (ESC) on line 20")
    ),
    "README.roboflow.txt with a bidi isolate": Row(
        _readme("README.roboflow.txt", 1, "\u2067"),
        Refused("README.roboflow.txt", "text", "\\u2067 (RIGHT-TO-LEFT ISOLATE)"),
    ),
    "control: README with tabs and Windows line ends": Row(_windows_readme_with_tabs, Accepted()),
    "control: class name in Persian, with a zero-width non-joiner": Row(
        _class_name("\u0645\u06cc\u200c\u0634\u0648\u062f"), Accepted()
    ),
    # ---- files that are no regular files: refused by name before they are opened (opening a FIFO blocks)
    "image that is a FIFO": Row(
        _fifo_instead_of(_image(".jpg")), Refused(TRAIN_JSON, "images[0].file_name", "is a FIFO (named pipe)")
    ),
    "annotation file that is a FIFO": Row(
        _fifo_instead_of(annotation_file), Refused(TRAIN_JSON, "file", "is a FIFO (named pipe)")
    ),
    "README that is a FIFO": Row(
        _fifo_instead_of(lambda root: root / "README.dataset.txt"),
        Refused("README.dataset.txt", "file", "is a FIFO (named pipe)"),
    ),
    # ---- damage that only decoding every pixel row shows
    "JPEG with 4,000 zeroed bytes in the middle": Row(
        _replace_image(".jpg", _zeroed_jpeg), Refused(_image(".jpg"), "image", "Corrupt JPEG data"), verify="full"
    ),
    "PNG whose IDAT holds 3 of 600 rows": Row(
        _replace_image(".png", _short_png), Refused(_image(".png"), "image", "holds 3 of 600 rows"), verify="full"
    ),
    # ---- exports that cannot be scored
    "no test split": Row(lambda root: shutil.rmtree(root / "test"), Warned(NotScorableWarning, "no test split")),
    "test folder without its annotation file": Row(
        lambda root: annotation_file(root, "test").unlink(), Warned(NotScorableWarning, "no test split")
    ),
    "test split without annotations": Row(
        _set(lambda d: d.update(annotations=[]), ("test",)), Warned(NotScorableWarning, "has no annotations")
    ),
    "test split without images": Row(
        _set(lambda d: d.update(images=[], annotations=[]), ("test",)), Refused(TEST_JSON, "images", "empty")
    ),
    # ---- folder names that cannot be config names
    "folder named with a line break": Row(
        _rename_export("sha\npes"), Refused(_data_folder, "folder name", r"'sha\npes' contains '\n'")
    ),
    "folder named with a line break, listed": Row(
        _rename_export("sha\npes"), Warned(UnusableExportWarning, r"'sha\npes' contains '\n'"), act="list"
    ),
    "folder named with ':'": Row(_rename_export("sha:pes"), Refused(_data_folder, "folder name", "contains ':'")),
    "folder named with ':', listed": Row(
        _rename_export("sha:pes"), Warned(UnusableExportWarning, "'sha:pes' contains ':'"), act="list"
    ),
    # ---- repairs: applied, warned and counted
    "box reaching outside its image": Row(
        _set(lambda d: d["annotations"][0].update(bbox=[300, 200, 400, 400])),
        Warned(RepairWarning, "box-clipped", {"train": {"box-clipped": 1}}),
    ),
    "annotation without area": Row(
        _set(lambda d: d["annotations"][0].pop("area")),
        Warned(RepairWarning, "area-from-box", {"train": {"area-from-box": 1}}),
    ),
}


def _run(row: Row, data_dir: Path, name: str) -> object:
    if row.act == "list":
        return custom_exports(data_dir)
    return rf100vl_builder(
        name, data_dir, data_dir / "no-fewshot", data_dir.parent / "cache", progress=False, verify_images=row.verify
    )


@pytest.mark.parametrize("case", list(ROWS))
def test_hostile_export(case: str, sample_root: Path, tmp_path: Path) -> None:
    row = ROWS[case]
    root = copy_export(sample_root / "sample", tmp_path / "data" / NAME)
    name = row.make(root) or NAME
    error: DataError | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = within(DEADLINE_S, lambda: _run(row, root.parent, name), fifos_under=root)
        except DataError as exc:  # anything else is a traceback, and fails the row
            error = exc
    ours = [w for w in caught if issubclass(w.category, OUR_WARNINGS)]
    outcome = row.outcome
    if isinstance(outcome, Refused):
        assert error is not None, f"accepted silently (warnings: {[str(w.message) for w in ours]})"
        at_fault = outcome.file(root) if callable(outcome.file) else root / outcome.file
        message = str(error)
        assert (Path(error.path), error.field) == (at_fault, outcome.field), message
        assert message.startswith(f"{at_fault}: {outcome.field}: ")
        assert outcome.words in message
        assert "\n" not in message and len(message) < 1000, "an error is one short line"
        return
    assert error is None, str(error)
    if isinstance(outcome, Accepted):
        assert not ours, [str(w.message) for w in ours]
        assert sum(len(s.images) for s in result.export.splits.values()) == 40
        return
    messages = [str(w.message) for w in ours if issubclass(w.category, outcome.category)]
    assert any(outcome.words in m for m in messages), messages
    if row.act == "list":
        assert name not in result
    for split, counted in outcome.repairs.items():
        assert result.export.splits[split].repairs == counted
