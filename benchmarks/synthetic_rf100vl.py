"""A synthetic RF100-VL at any fraction of the real size, for measuring the project at scale.

At ``scale=1`` it has the real benchmark's totals: the catalogue's 100 datasets (named by
their basenames), 164,149 images of which 16,416 are test images, about 1.3 million boxes,
564 classes, and 325 images with 300 boxes or more. Dataset sizes and classes per dataset are
heavy-tailed (log-normal, seeded), so a few datasets hold most images, as in the real one;
boxes per image are log-normal with the crowded images on top. Each export is laid out as
Roboflow writes one: ``train/``, ``valid/``, ``test/``, each with ``_annotations.coco.json``
whose category 0 is the dataset-level supercategory (no boxes) and whose image and
annotation ids start at 0, and tiny JPEGs (64x48, each one's bytes its own) named
``<stem>_jpg.rf.<hash>.jpg``. The same ``(scale, seed)`` writes the same bytes.

``python -m benchmarks.synthetic_rf100vl OUT --scale 0.2`` writes one; the scale benchmark
(``benchmarks/test_scale_rf100vl.py``) writes its own.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from rf100vl_hf import catalog

TOTAL_IMAGES = 164_149
TEST_IMAGES = 16_416
TOTAL_BOXES = 1_300_000
TOTAL_CLASSES = 564
CROWDED_IMAGES = 325
"""Images with :data:`CROWDED_MIN` boxes or more, at scale 1."""
CROWDED_MIN, CROWDED_MAX = 300, 600
VALID_SHARE = 0.15
SIZE = (64, 48)
MIN_IMAGES = 2
"""Images per split of the smallest dataset, whatever the scale."""


@dataclass(frozen=True)
class DatasetPlan:
    """One synthetic export: its name, images per split folder and number of classes."""

    name: str
    splits: dict[str, int]
    classes: int

    @property
    def images(self) -> int:
        return sum(self.splits.values())


def _shares(total: int, weights: np.ndarray, floor: int) -> list[int]:
    """``total`` split in proportion to ``weights``, each at least ``floor`` (largest remainders)."""
    spare = max(0, total - floor * len(weights))
    exact = weights / weights.sum() * spare
    counts = np.floor(exact).astype(int)
    for index in np.argsort(-(exact - counts), kind="stable")[: spare - int(counts.sum())]:
        counts[index] += 1
    return [floor + int(count) for count in counts]


def plan(scale: float, seed: int = 0) -> list[DatasetPlan]:
    """The 100 exports at ``scale`` (1: the real totals), in catalogue order."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], not {scale}")
    names = [entry.basename for entry in catalog.entries()]
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(0.0, 1.2, len(names))
    tests = _shares(round(TEST_IMAGES * scale), sizes, MIN_IMAGES)
    rest = _shares(round((TOTAL_IMAGES - TEST_IMAGES) * scale), sizes, 2 * MIN_IMAGES)
    classes = _shares(TOTAL_CLASSES, rng.lognormal(0.0, 0.8, len(names)), 1)
    plans = []
    for name, test, other, count in zip(names, tests, rest, classes):
        valid = max(MIN_IMAGES, round(other * VALID_SHARE))
        plans.append(DatasetPlan(name, {"train": other - valid, "valid": valid, "test": test}, count))
    return plans


def boxes_per_image(images: int, rng: np.random.Generator) -> np.ndarray:
    """Heavy-tailed box counts: log-normal (mean about 7, at most ``CROWDED_MIN - 1``), with
    ``CROWDED_IMAGES / TOTAL_IMAGES`` of the images crowded (300 to 600 boxes)."""
    crowded_boxes = CROWDED_IMAGES * (CROWDED_MIN + CROWDED_MAX) / 2
    mean = (TOTAL_BOXES - crowded_boxes) / (TOTAL_IMAGES - CROWDED_IMAGES) - 0.5  # ceil adds half a box
    sigma = 1.0
    counts = np.ceil(rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, images)).astype(int)
    counts = np.minimum(counts, CROWDED_MIN - 1)
    crowded = rng.random(images) < CROWDED_IMAGES / TOTAL_IMAGES
    counts[crowded] = rng.integers(CROWDED_MIN, CROWDED_MAX + 1, int(crowded.sum()))
    return counts


def _jpeg(index: int, rng: np.random.Generator) -> bytes:
    """A tiny JPEG whose bytes no other image of the benchmark has (its index is in its pixels)."""
    pixels = rng.integers(0, 256, (SIZE[1] // 8, SIZE[0] // 8, 3), dtype=np.uint8)
    pixels[0, :4, 0] = np.frombuffer(index.to_bytes(4, "big"), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).resize(SIZE, Image.Resampling.NEAREST).save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def write_export(root: Path, dataset: DatasetPlan, seed: int = 0) -> Path:
    """One Roboflow-style export of ``dataset`` under ``root / name``."""
    folder = root / dataset.name
    rng = np.random.default_rng([seed, *dataset.name.encode()])
    supercategory = dataset.name
    categories = [{"id": 0, "name": supercategory, "supercategory": "none"}] + [
        {"id": i, "name": f"{dataset.name}-class-{i}", "supercategory": supercategory}
        for i in range(1, dataset.classes + 1)
    ]
    counter = 0
    for split, count in dataset.splits.items():
        (folder / split).mkdir(parents=True, exist_ok=True)
        images, annotations = [], []
        for image_id, boxes in enumerate(boxes_per_image(count, rng)):
            salt = f"{dataset.name}/{split}/{image_id}".encode()
            name = f"img_{image_id:06d}_jpg.rf.{hashlib.md5(salt, usedforsecurity=False).hexdigest()}.jpg"
            (folder / split / name).write_bytes(_jpeg(counter, rng))
            counter += 1
            images.append({"id": image_id, "license": 1, "file_name": name, "height": SIZE[1], "width": SIZE[0],
                           "date_captured": "2025-04-01T00:00:00+00:00"})
            w = rng.integers(2, SIZE[0] // 2, boxes)
            h = rng.integers(2, SIZE[1] // 2, boxes)
            x = rng.integers(0, SIZE[0] - w + 1)
            y = rng.integers(0, SIZE[1] - h + 1)
            labels = rng.integers(1, dataset.classes + 1, boxes)
            for bx, by, bw, bh, label in zip(x.tolist(), y.tolist(), w.tolist(), h.tolist(), labels.tolist()):
                annotations.append({"id": len(annotations), "image_id": image_id, "category_id": label,
                                    "bbox": [bx, by, bw, bh], "area": bw * bh, "segmentation": [], "iscrowd": 0})
        data = {"info": {"description": f"synthetic {dataset.name}"}, "licenses": [{"id": 1, "name": "CC BY 4.0"}],
                "categories": categories, "images": images, "annotations": annotations}
        (folder / split / "_annotations.coco.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def write_synthetic(root: Path, scale: float, seed: int = 0, names: list[str] | None = None) -> list[DatasetPlan]:
    """Write the synthetic benchmark at ``scale`` under ``root`` (only ``names`` when given) and
    return its plan; a folder already complete for the same ``(scale, seed)`` is kept as it is."""
    root = Path(root)
    plans = [p for p in plan(scale, seed) if names is None or p.name in names]
    marker = root / f".complete-{scale}-{seed}-{len(plans)}"
    if not marker.exists():
        for dataset in plans:
            write_export(root, dataset, seed)
        marker.write_text(json.dumps([p.name for p in plans]), encoding="utf-8")
    return plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    plans = write_synthetic(args.out, args.scale, args.seed)
    print(f"{len(plans)} exports, {sum(p.images for p in plans)} images in {args.out}")


if __name__ == "__main__":
    main()
