"""The embedded UOUO source: cut-outs the package draws itself.

Eight categories of flat objects (star, ring, cross, crescent, arrow, gear, heart, bolt),
four RGBA images each, every one with its own rotation, aspect, size, colour and stripe
pattern, drawn at four times the size and reduced so the alpha edge is anti-aliased like
a real cut-out's. It lets ``load_uouo`` and the tests run with no download. Drawing is
seeded, so a package version always writes the same bytes. The drawings are the package's
own, so the sample's manifest gives the package's licence (Apache-2.0) for the Hub card.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image, ImageDraw

from rf100vl_hf import paths
from rf100vl_hf.uouo.sources import MANIFEST

SAMPLE_VERSION = "2"
SAMPLE_NAME = "uouo-sample"  # the folder name, which is the source name in metadata
IMAGES_PER_CATEGORY = 4
LICENSE = "apache-2.0"
_SUPERSAMPLE = 4

Points = list[tuple[float, float]]


def _star() -> Points:
    return [
        (math.cos(a) * r, math.sin(a) * r)
        for i in range(10)
        for a, r in [(math.pi / 2 + i * math.pi / 5, 1.0 if i % 2 == 0 else 0.45)]
    ]


def _cross() -> Points:
    w = 0.35
    return [(-w, -1), (w, -1), (w, -w), (1, -w), (1, w), (w, w), (w, 1), (-w, 1), (-w, w), (-1, w), (-1, -w), (-w, -w)]


def _arrow() -> Points:
    return [(-1, -0.3), (0.2, -0.3), (0.2, -0.8), (1, 0), (0.2, 0.8), (0.2, 0.3), (-1, 0.3)]


def _gear() -> Points:
    teeth = 12
    return [
        (math.cos(a) * r, math.sin(a) * r)
        for i in range(teeth * 4)
        for a, r in [(2 * math.pi * i / (teeth * 4), 1.0 if i % 4 in (1, 2) else 0.78)]
    ]


def _heart() -> Points:
    return [
        (16 * math.sin(t) ** 3 / 17, -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t)) / 17)
        for t in np.linspace(0, 2 * math.pi, 90, endpoint=False)
    ]


def _bolt() -> Points:
    return [(0.1, -1), (-0.6, 0.15), (-0.05, 0.15), (-0.25, 1), (0.6, -0.2), (0.05, -0.2), (0.35, -1)]


def _circle(n: int = 90) -> Points:
    return [(math.cos(t), math.sin(t)) for t in np.linspace(0, 2 * math.pi, n, endpoint=False)]


# Each category: (outline, hole or bite cut out of it as (points, dx, dy, scale), base colour)
CATEGORIES: dict[str, tuple[Callable[[], Points], tuple[Callable[[], Points], float, float, float] | None, tuple[int, int, int]]] = {
    "star": (_star, None, (235, 190, 30)),
    "ring": (_circle, (_circle, 0.0, 0.0, 0.55), (40, 120, 220)),
    "cross": (_cross, None, (210, 40, 50)),
    "crescent": (_circle, (_circle, 0.45, -0.15, 0.85), (150, 80, 200)),
    "arrow": (_arrow, None, (30, 160, 90)),
    "gear": (_gear, (_circle, 0.0, 0.0, 0.3), (120, 120, 130)),
    "heart": (_heart, None, (230, 80, 150)),
    "bolt": (_bolt, None, (250, 130, 20)),
}


def _place(points: Points, angle: float, sx: float, sy: float, half: float, dx: float = 0, dy: float = 0,
           scale: float = 1) -> Points:
    cos, sin = math.cos(angle), math.sin(angle)
    out = []
    for x, y in points:
        x, y = (x * scale + dx) * sx, (y * scale + dy) * sy
        out.append((half + (x * cos - y * sin) * half * 0.9, half + (x * sin + y * cos) * half * 0.9))
    return out


def draw_cutout(category: str, rng: np.random.Generator) -> Image.Image:
    """One RGBA cut-out of ``category`` with its own pose, size and colours."""
    outline, hole, colour = CATEGORIES[category]
    side = int(rng.integers(96, 161)) * _SUPERSAMPLE
    half = side / 2
    angle = float(rng.uniform(-0.6, 0.6))
    sx, sy = float(rng.uniform(0.75, 1.0)), float(rng.uniform(0.75, 1.0))
    fill = tuple(int(np.clip(c + rng.integers(-35, 36), 0, 255)) for c in colour)
    stripe = tuple(int(c * 0.6) for c in fill)
    pattern = Image.new("RGB", (side, side), fill)
    draw = ImageDraw.Draw(pattern)
    step = int(rng.integers(10, 20)) * _SUPERSAMPLE
    for x in range(-side, 2 * side, step):
        draw.line([(x, 0), (x + side // 2, side)], fill=stripe, width=step // 3)
    mask = Image.new("L", (side, side), 0)
    shape = ImageDraw.Draw(mask)
    shape.polygon(_place(outline(), angle, sx, sy, half), fill=255)
    if hole is not None:
        points, dx, dy, scale = hole
        shape.polygon(_place(points(), angle, sx, sy, half, dx, dy, scale), fill=0)
    image = pattern.convert("RGBA")
    image.putalpha(mask)
    small = side // _SUPERSAMPLE
    return image.convert("RGBa").resize((small, small), Image.Resampling.LANCZOS).convert("RGBA")


def write_sample_source(root: str | Path, seed: int = 0) -> Path:
    """Write the cut-outs as ``root/<category>/<category>_<n>.png`` and the manifest (the
    licence), and return ``root``."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).write_text(json.dumps({"license": LICENSE}) + "\n", encoding="utf-8")
    for index, category in enumerate(CATEGORIES):
        folder = root / category
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([seed, index])
        for n in range(IMAGES_PER_CATEGORY):
            draw_cutout(category, rng).save(folder / f"{category}_{n + 1:02d}.png", format="PNG", compress_level=6)
    return root


def ensure_sample_source() -> Path:
    """The sample source under the cache home, written once (atomically) per sample version."""
    target = paths.cache_home() / "uouo-sample" / SAMPLE_VERSION / SAMPLE_NAME
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".uouo-sample-", dir=target.parent))
    write_sample_source(staging / SAMPLE_NAME)
    try:
        os.replace(staging / SAMPLE_NAME, target)
    except OSError:  # another process won the race: its copy is identical
        pass
    shutil.rmtree(staging, ignore_errors=True)
    return target
