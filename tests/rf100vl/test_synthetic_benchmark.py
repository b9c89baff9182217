"""The scale benchmark's synthetic RF100-VL (``benchmarks/synthetic_rf100vl.py``): the real totals
at scale 1, heavy-tailed boxes, and exports the reader accepts as Roboflow's, with no repair."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from rf100vl_hf import catalog
from rf100vl_hf.rf100vl.reader import read_export

from benchmarks.synthetic_rf100vl import TOTAL_IMAGES, boxes_per_image, plan, write_synthetic


def test_at_scale_1_the_plan_has_the_real_totals_and_heavy_tails() -> None:
    plans = plan(1.0)
    assert [p.name for p in plans] == [entry.basename for entry in catalog.entries()]
    assert sum(p.images for p in plans) == 164_149 and sum(p.splits["test"] for p in plans) == 16_416
    assert sum(p.classes for p in plans) == 564
    sizes = sorted(p.images for p in plans)
    assert sum(sizes[-10:]) > 2 * sum(sizes[:50])  # the ten largest outweigh the smaller half twice
    boxes = boxes_per_image(TOTAL_IMAGES, np.random.default_rng(0))
    assert 1.25e6 < boxes.sum() < 1.35e6 and 250 < (boxes >= 300).sum() < 400 and np.median(boxes) <= 6
    assert sum(p.images for p in plan(0.2)) == round(0.2 * 16_416) + round(0.2 * (164_149 - 16_416))


def test_a_written_export_reads_as_roboflow_writes_one(tmp_path: Path) -> None:
    (first, *_), names = plan(0.001), [entry.basename for entry in catalog.entries()][:2]
    written = write_synthetic(tmp_path, 0.001, names=names)
    assert [p.name for p in written] == names and written[0] == first
    raw = json.loads((tmp_path / names[0] / "test" / "_annotations.coco.json").read_text())
    assert raw["categories"][0] == {"id": 0, "name": names[0], "supercategory": "none"}
    assert raw["images"][0]["id"] == 0 and raw["annotations"][0]["id"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no repair, no warning
        export = read_export(tmp_path / names[0], progress=False)
    assert export.supercategory == names[0] and len(export.classes) == first.classes
    assert [len(s.images) for s in export.splits.values()] == list(first.splits.values())
    assert sum(len(image.annotations) for image in export.splits["test"].images) == len(raw["annotations"])
