"""The embedded sample: a small Roboflow-style export the package draws itself.

It lets the README's main job and the tests run on a fresh machine with no download, and
it carries every quirk a *valid* real export may have (:data:`QUIRKS`), so the whole path
is exercised; the reader accepts it with no repair. Drawing is seeded, so the same
package version writes the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from rf100vl_hf import paths

SAMPLE_VERSION = "2"
"""Bumped whenever the drawn bytes change, so a stale copy in the cache home is not reused."""

QUIRKS: dict[str, str] = {
    "category-0-supercategory": "category 0 is the dataset-level supercategory: supercategory 'none', no boxes",
    "long-category-0-name": "category 0 has a 140-character name",
    "ids-from-0": "image and annotation ids start at 0",
    "integer-and-float-boxes": "integer boxes beside float ones",
    "polygon-segmentation": "every box has a polygon segmentation and an area equal to the box area",
    "zero-width-box": "a box of zero width",
    "zero-height-box": "a box of zero height",
    "image-without-boxes": "an image with no boxes, in every split",
    "class-absent-from-split": "a class with no box in a split (triangle in valid)",
    "image-modes": "grayscale, 16-bit grayscale, palette, RGBA, CMYK and RGB images in every split",
    "jpeg-and-png": "JPEG and PNG files",
    "exif-orientation": "a JPEG stored turned with EXIF orientation 6, its JSON size and boxes in the displayed frame",
    "repeated-stem": "two files with the same original stem and different Roboflow hashes",
    "near-duplicate": "an augmented (mirrored) copy of another image of the split",
    "annotator-instructions": "a README.dataset.txt with annotator instructions per class",
    "roboflow-readme": "a README.roboflow.txt",
}
"""Every quirk the sample claims to carry; the tests check each one in the written files."""

CLASSES = ("circle", "square", "triangle")
COLORS = {"circle": (220, 40, 40), "square": (40, 90, 220), "triangle": (30, 170, 60)}
SUPERCATEGORY = (
    "shapes-sample-of-rf100vl-hf-drawn-by-the-package-itself-so-that-every-quirk-of-a-real-"
    "roboflow-export-is-exercised-without-any-download-ever"
)
SPLIT_SIZES = {"train": 24, "valid": 8, "test": 8}
SIZE = (320, 240)
EXIF_INDEX = 6  # per split: the image stored turned
COPY_INDEX = 7  # per split: the mirrored copy of EXIF_INDEX, under the same stem

INSTRUCTIONS = """# rf100vl-hf-sample > generated
https://github.com/rf100vl-hf/rf100vl-hf

Provided by rf100vl-hf
License: CC0 1.0

# Introduction
Coloured shapes drawn on noisy backgrounds. The classes are:
- **circle**: a filled red disc.
- **square**: a filled blue square.
- **triangle**: a filled green triangle.

# Object Classes

## circle
### Description
A filled red disc, of any size, on a noisy background.

### Instructions
- Draw a tight box around the whole disc.
- Do not box red noise that is not a disc.

## square
### Description
A filled blue square with sides parallel to the image borders.

### Instructions
Box the square tightly, including its edges.

## triangle
### Description
A filled green triangle pointing up.

### Instructions
- Box the whole triangle, from its apex to its base.
"""

ROBOFLOW_README = """
rf100vl-hf-sample - generated
==============================

This dataset was drawn by rf100vl-hf so that its tests and demo need no download.
It is laid out like a Roboflow COCO export.

License: CC0 1.0
"""

# The (PIL mode, extension) of each image, cycling, so every mode is in every split of
# eight images or more. The images at EXIF_INDEX and COPY_INDEX are RGB JPEGs whatever
# their place in the cycle.
_FORMATS = [
    ("RGB", "jpg"),
    ("L", "png"),
    ("I;16", "png"),
    ("P", "png"),
    ("RGBA", "png"),
    ("CMYK", "jpg"),
    ("RGB", "png"),
    ("RGB", "jpg"),
]

Box = tuple[str, list[float]]  # class name, COCO xywh


def _draw_shape(draw: ImageDraw.ImageDraw, name: str, box: tuple[int, int, int, int]) -> None:
    x0, y0, x1, y1 = box
    color = COLORS[name]
    if name == "circle":
        draw.ellipse((x0, y0, x1 - 1, y1 - 1), fill=color)
    elif name == "square":
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=color)
    else:
        draw.polygon([((x0 + x1) / 2, y0), (x1 - 1, y1 - 1), (x0, y1 - 1)], fill=color)


def _encode(image: Image.Image, mode: str, ext: str, orientation: int | None = None) -> bytes:
    if mode == "I;16":
        out = Image.fromarray(np.asarray(image.convert("L"), dtype=np.uint16) * 257)
    elif mode == "P":
        out = image.quantize(64, method=Image.Quantize.FASTOCTREE)
    else:
        out = image.convert(mode)
    buffer = io.BytesIO()
    if ext == "png":
        out.save(buffer, format="PNG")
    elif orientation is None:
        out.save(buffer, format="JPEG", quality=90)
    else:
        exif = Image.Exif()
        exif[0x0112] = orientation
        out.save(buffer, format="JPEG", quality=90, exif=exif.tobytes())
    return buffer.getvalue()


def _draw_image(split: str, index: int, global_index: int, rng: random.Random) -> tuple[Image.Image, list[Box]]:
    """A noisy canvas with 1-3 shapes (none for image 1), and the quirky boxes of image 2 and 3."""
    noise = np.random.default_rng(global_index).integers(90, 200, size=(SIZE[1], SIZE[0], 3), dtype=np.uint8)
    canvas = Image.fromarray(noise)
    draw = ImageDraw.Draw(canvas)
    allowed = [c for c in CLASSES if not (split == "valid" and c == "triangle")]
    boxes: list[Box] = []
    for _ in range(0 if index == 1 else rng.randint(1, 3)):
        name = rng.choice(allowed)
        w = rng.randint(30, 90)
        x0, y0 = rng.randint(0, SIZE[0] - w), rng.randint(0, SIZE[1] - w)
        _draw_shape(draw, name, (x0, y0, x0 + w, y0 + w))
        boxes.append((name, [x0, y0, w, w]))
    if index == 2:  # quirks of real test sets: a zero-width and a zero-height box
        boxes += [("square", [10, 10, 0, 25]), ("circle", [40, 200, 18, 0])]
    if index == 3:  # float boxes beside integer ones
        name, (x, y, w, h) = boxes[0]
        boxes[0] = (name, [x + 0.25, y + 0.5, w - 0.75, h - 0.5])
    return canvas, boxes


def _mirrored(canvas: Image.Image, boxes: list[Box]) -> tuple[Image.Image, list[Box]]:
    """An augmented copy, as Roboflow's augmentation writes one: flipped left to right."""
    flipped = [(name, [canvas.width - x - w, y, w, h]) for name, (x, y, w, h) in boxes]
    return canvas.transpose(Image.Transpose.FLIP_LEFT_RIGHT), flipped


def _file_name(stem: str, ext: str, salt: str) -> str:
    """A Roboflow-style name: the original stem and extension, then ``.rf.<hash>``."""
    return f"{stem}_{ext}.rf.{hashlib.md5(salt.encode(), usedforsecurity=False).hexdigest()}.{ext}"


def _split(folder: Path, split: str, count: int, rng: random.Random, start: int) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    turned: tuple[Image.Image, list[Box]] | None = None  # the image at EXIF_INDEX, as displayed
    for index in range(count):
        global_index = start + index
        mode, ext = _FORMATS[global_index % len(_FORMATS)]
        stem, orientation = f"shape_{split}_{index:03d}", None
        if index == COPY_INDEX and turned is not None:
            canvas, boxes = _mirrored(*turned)
            mode, ext, stem = "RGB", "jpg", f"shape_{split}_{EXIF_INDEX:03d}"
        else:
            canvas, boxes = _draw_image(split, index, global_index, rng)
        stored = canvas
        if index == EXIF_INDEX:  # stored turned; the displayed frame (what the JSON describes) is upright
            turned = canvas, boxes
            stored, mode, ext, orientation = canvas.transpose(Image.Transpose.ROTATE_90), "RGB", "jpg", 6
        file_name = _file_name(stem, ext, f"{split}/{index}")
        (folder / file_name).write_bytes(_encode(stored, mode, ext, orientation))
        images.append(
            {
                "id": index,
                "license": 1,
                "file_name": file_name,
                "height": SIZE[1],
                "width": SIZE[0],
                "date_captured": "2026-01-01T00:00:00+00:00",
            }
        )
        for name, (x, y, w, h) in boxes:
            annotations.append(
                {
                    "id": len(annotations),
                    "image_id": index,
                    "category_id": CLASSES.index(name) + 1,
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
                    "iscrowd": 0,
                }
            )
    categories = [{"id": 0, "name": SUPERCATEGORY, "supercategory": "none"}] + [
        {"id": i + 1, "name": name, "supercategory": SUPERCATEGORY} for i, name in enumerate(CLASSES)
    ]
    data = {
        "info": {"year": "2026", "version": "1", "description": "Drawn by rf100vl-hf", "contributor": "rf100vl-hf"},
        "licenses": [{"id": 1, "url": "https://creativecommons.org/publicdomain/zero/1.0/", "name": "CC0 1.0"}],
        "categories": categories,
        "images": images,
        "annotations": annotations,
    }
    (folder / "_annotations.coco.json").write_text(json.dumps(data), encoding="utf-8")
    return data


def write_sample_export(root: str | Path, seed: int = 0, sizes: dict[str, int] | None = None) -> Path:
    """Write the sample export to ``root`` (created) and return it.

    ``sizes`` sets the number of images per split folder (``train``, ``valid``, ``test``);
    each split needs eight images or more to carry every quirk.
    """
    root = Path(root)
    sizes = sizes or SPLIT_SIZES
    if min(sizes.values()) <= COPY_INDEX:
        raise ValueError(f"each split needs more than {COPY_INDEX} images to carry every quirk, got {sizes}")
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    start = 0
    for split, count in sizes.items():
        _split(root / split, split, count, rng, start)
        start += count
    (root / "README.dataset.txt").write_text(INSTRUCTIONS, encoding="utf-8")
    (root / "README.roboflow.txt").write_text(ROBOFLOW_README, encoding="utf-8")
    return root


def ensure_sample() -> Path:
    """The sample export under the cache home, written once (atomically) per sample version."""
    target = paths.cache_home() / "sample" / SAMPLE_VERSION / "sample"
    if (target / "test" / "_annotations.coco.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".sample-", dir=target.parent))
    write_sample_export(staging / "sample")
    try:
        os.replace(staging / "sample", target)
    except OSError:  # another process won the race: its copy is identical
        pass
    shutil.rmtree(staging, ignore_errors=True)
    return target
