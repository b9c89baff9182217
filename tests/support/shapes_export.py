"""A small Roboflow-style export of clear, separable shapes, for tests that train a detector:
a plain background with one or two large filled shapes per image, each class its own shape
and colour, so that a tiny detector trained for seconds on CPU learns it."""

from __future__ import annotations

import json
import random
from pathlib import Path

from PIL import Image, ImageDraw

SHAPE_CLASSES = ("red-square", "blue-disc")
COLOURS = {"red-square": (220, 30, 30), "blue-disc": (30, 60, 220)}
SIZES = {"train": 48, "valid": 12, "test": 12}
SUPERCATEGORY = "shapes"


def _image(rng: random.Random, size: int) -> tuple[Image.Image, list[tuple[str, list[float]]]]:
    image = Image.new("RGB", (size, size), (235, 235, 225))
    draw = ImageDraw.Draw(image)
    boxes: list[tuple[str, list[float]]] = []
    for name in rng.sample(SHAPE_CLASSES, rng.randint(1, 2)):
        for _ in range(50):  # a place that overlaps no earlier shape
            side = rng.randint(size * 3 // 10, size * 9 // 20)
            x, y = rng.randint(0, size - side), rng.randint(0, size - side)
            if all(x + side <= bx or bx + bw <= x or y + side <= by or by + bh <= y for _, (bx, by, bw, bh) in boxes):
                break
        else:
            continue
        shape = draw.rectangle if name == "red-square" else draw.ellipse
        shape((x, y, x + side - 1, y + side - 1), fill=COLOURS[name])
        boxes.append((name, [float(x), float(y), float(side), float(side)]))
    return image, boxes


def write_shapes_export(root: Path, sizes: dict[str, int] | None = None, seed: int = 0, image_size: int = 64) -> Path:
    """Write the export to ``root`` (``train``, ``valid``, ``test``) and return it."""
    rng = random.Random(seed)
    categories = [{"id": 0, "name": SUPERCATEGORY, "supercategory": "none"}] + [
        {"id": i + 1, "name": name, "supercategory": SUPERCATEGORY} for i, name in enumerate(SHAPE_CLASSES)]
    for split, count in (sizes or SIZES).items():
        folder = Path(root) / split
        folder.mkdir(parents=True, exist_ok=True)
        images, annotations = [], []
        for index in range(count):
            image, boxes = _image(rng, image_size)
            name = f"{split}_{index:03d}.png"
            image.save(folder / name)
            images.append({"id": index, "file_name": name, "width": image_size, "height": image_size})
            for cls, (x, y, w, h) in boxes:
                annotations.append({"id": len(annotations), "image_id": index, "category_id": SHAPE_CLASSES.index(cls) + 1,
                                    "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0, "segmentation": []})
        data = {"info": {"description": "shapes"}, "licenses": [], "categories": categories, "images": images,
                "annotations": annotations}
        (folder / "_annotations.coco.json").write_text(json.dumps(data), encoding="utf-8")
    return Path(root)
