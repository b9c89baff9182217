"""The embedded sample: a small Roboflow-style export the package draws itself.

It lets the README's main job and the tests run on a fresh machine with no download, and
it carries every quirk a *valid* real export may have, so the whole path is exercised:

- category 0 is the dataset-level supercategory (a 140-character name, ``"none"``
  supercategory, no boxes); annotation ids start at 0;
- integer and float boxes, polygon ``segmentation`` with ``area`` equal to the box area,
  zero-width and zero-height boxes, images with no boxes, a class with no box in a split;
- images in grayscale, 16-bit grayscale, palette, RGBA, CMYK and RGB, JPEG and PNG, one
  stored turned with an EXIF orientation tag (boxes and JSON size in the displayed
  frame, as annotation tools record them), and two files with the same stem;
- a ``README.dataset.txt`` with annotator instructions per class and a
  ``README.roboflow.txt``.

Drawing is seeded, so the same package version writes the same bytes.
"""

from __future__ import annotations

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

SAMPLE_VERSION = "1"
CLASSES = ("circle", "square", "triangle")
COLORS = {"circle": (220, 40, 40), "square": (40, 90, 220), "triangle": (30, 170, 60)}
SUPERCATEGORY = (
    "shapes-sample-of-rf100vl-hf-drawn-by-the-package-itself-so-that-every-quirk-of-a-real-"
    "roboflow-export-is-exercised-without-any-download"
)[:140]
SPLIT_SIZES = {"train": 24, "valid": 8, "test": 8}
SIZE = (320, 240)

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

# The image format of each image index: (PIL mode, file extension). Cycling through them
# puts every mode in every split.
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
        gray = np.asarray(image.convert("L"), dtype=np.uint16) * 257
        out = Image.fromarray(gray)
    elif mode == "P":
        out = image.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    elif mode == "RGBA":
        out = image.convert("RGBA")
        out.putalpha(Image.new("L", image.size, 255))
    else:
        out = image.convert(mode)
    buffer = io.BytesIO()
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        out.save(buffer, format="JPEG", quality=90, exif=exif.tobytes())
    else:
        out.save(buffer, format="JPEG" if ext == "jpg" else "PNG", **({"quality": 90} if ext == "jpg" else {}))
    return buffer.getvalue()


def _split(folder: Path, split: str, count: int, rng: random.Random, start: int) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for index in range(count):
        global_index = start + index
        mode, ext = _FORMATS[global_index % len(_FORMATS)]
        noise = np.random.default_rng(global_index).integers(90, 200, size=(SIZE[1], SIZE[0], 3), dtype=np.uint8)
        canvas = Image.fromarray(noise)
        draw = ImageDraw.Draw(canvas)
        # Image 1 of each split has no boxes; triangles never appear in "valid".
        n_objects = 0 if index == 1 else rng.randint(1, 3)
        allowed = [c for c in CLASSES if not (split == "valid" and c == "triangle")]
        boxes = []
        for _ in range(n_objects):
            name = rng.choice(allowed)
            w = rng.randint(30, 90)
            x0, y0 = rng.randint(0, SIZE[0] - w), rng.randint(0, SIZE[1] - w)
            _draw_shape(draw, name, (x0, y0, x0 + w, y0 + w))
            boxes.append((name, [x0, y0, w, w]))
        if index == 2:  # quirks of real test sets: a zero-width and a zero-height box
            boxes.append(("square", [10, 10, 0, 25]))
            boxes.append(("circle", [40, 200, 18, 0]))
        if index == 3 and boxes:  # float boxes beside integer ones
            name, (x, y, w, h) = boxes[0]
            boxes[0] = (name, [x + 0.25, y + 0.5, w - 0.75, h - 0.5])
        stem = f"shape_{split}_{index:03d}"
        orientation = None
        if index == 6:  # stored turned; the displayed frame (what the JSON describes) is upright
            canvas = canvas.transpose(Image.Transpose.ROTATE_90)
            mode, ext, orientation = "RGB", "jpg", 6
        if index == 7:  # the same stem as image 6 (a JPEG), as a PNG
            stem, mode, ext = f"shape_{split}_{index - 1:03d}", "RGB", "png"
        file_name = f"{stem}_{ext}.rf.{global_index:032x}.{ext}"
        (folder / file_name).write_bytes(_encode(canvas, mode, ext, orientation))
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
    """Write the sample export to ``root`` (created) and return it."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    start = 0
    for split, count in (sizes or SPLIT_SIZES).items():
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
