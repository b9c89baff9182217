"""A generated raw image collection for the curation tests: objects on textured backgrounds,
planted outliers, bad files, labels; and a remover that finds the objects.

Each good image is one of the sample's drawn objects (:func:`rf100vl_hf.uouo.sample.draw_cutout`,
saturated colours) alpha-composited at a known place on a grey textured background, so the
object's true alpha is known. An outlier of a category is a drawing of another category. The
remover (:func:`write_saturation_remover`) is an ONNX network in rembg's ``u2net_custom``
layout whose mask is the colour saturation through a steep sigmoid: grey background out,
coloured object in.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from rf100vl_hf.uouo.sample import draw_cutout

CATEGORIES = ("star", "ring", "cross", "arrow", "heart")  # saturated ones (the sample's gear is grey)
CANVAS = 224


@dataclass
class RawCollectionFiles:
    """What was written: each object's alpha on its canvas by source id, the outliers, the bad files."""

    root: Path
    alphas: dict[str, np.ndarray] = field(default_factory=dict)
    outliers: set[str] = field(default_factory=set)
    bad_files: dict[str, str] = field(default_factory=dict)  # source id -> what is wrong
    duplicates: set[str] = field(default_factory=set)

    def write_labels(self, path: Path, every: int = 1) -> Path:
        """A labels CSV naming every ``every``-th image (outliers bad, others good)."""
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["path", "label"])
            for index, source_id in enumerate(sorted(self.alphas)):
                if index % every == 0 or source_id in self.outliers:
                    writer.writerow([source_id, "bad" if source_id in self.outliers else "good"])
        return path


def _background(rng: np.random.Generator) -> Image.Image:
    """A grey texture: a smooth gradient, stripes and noise, every pixel grey."""
    y, x = np.mgrid[0:CANVAS, 0:CANVAS]
    waves = 40 * np.sin(x / rng.uniform(6, 14)) * np.cos(y / rng.uniform(8, 20))
    base = 120 + waves + rng.normal(0, 8, (CANVAS, CANVAS))
    grey = np.clip(base + rng.uniform(-20, 20), 60, 200).astype(np.uint8)
    return Image.fromarray(np.stack([grey] * 3, axis=-1))


def compose(category: str, rng: np.random.Generator) -> tuple[Image.Image, np.ndarray]:
    """An object of ``category`` on a textured background, and its alpha on the canvas."""
    cutout = draw_cutout(category, rng)
    canvas = _background(rng).convert("RGBA")
    x = int(rng.integers(0, CANVAS - cutout.width + 1))
    y = int(rng.integers(0, CANVAS - cutout.height + 1))
    canvas.alpha_composite(cutout, (x, y))
    alpha = np.zeros((CANVAS, CANVAS), dtype=np.uint8)
    alpha[y : y + cutout.height, x : x + cutout.width] = np.asarray(cutout.getchannel("A"))
    return canvas.convert("RGB"), alpha


def write_raw_collection(root: Path, per_category: int = 6, outliers: int = 2, seed: int = 0,
                         bad_files: bool = True) -> RawCollectionFiles:
    """One folder per category of :data:`CATEGORIES`: ``per_category`` objects and ``outliers``
    drawings of the next category; with ``bad_files``, also a text file, a truncated JPEG, an
    animated GIF and a byte-identical copy."""
    written = RawCollectionFiles(root)
    for index, category in enumerate(CATEGORIES):
        folder = root / category
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([seed, index])
        other = CATEGORIES[(index + 1) % len(CATEGORIES)]
        for n in range(per_category + outliers):
            image, alpha = compose(category if n < per_category else other, rng)
            name = f"{category}_{n:02d}.jpg"
            image.save(folder / name, quality=95, subsampling=0)  # 4:4:4: no colour bleeding past the object
            written.alphas[f"{category}/{name}"] = alpha
            if n >= per_category:
                written.outliers.add(f"{category}/{name}")
    if bad_files:
        first = root / CATEGORIES[0]
        (first / "notes.txt").write_text("not an image\n")
        data = (first / f"{CATEGORIES[0]}_00.jpg").read_bytes()
        (first / "truncated.jpg").write_bytes(data[: len(data) // 2])
        (first / f"{CATEGORIES[0]}_00_copy.jpg").write_bytes(data)
        frames = [Image.new("RGB", (32, 32), colour) for colour in ("red", "blue")]
        gif = io.BytesIO()
        frames[0].save(gif, format="GIF", save_all=True, append_images=frames[1:])
        (first / "animated.gif").write_bytes(gif.getvalue())
        written.bad_files = {f"{CATEGORIES[0]}/notes.txt": "image", f"{CATEGORIES[0]}/truncated.jpg": "image",
                             f"{CATEGORIES[0]}/animated.gif": "animated"}
        written.duplicates = {f"{CATEGORIES[0]}/{CATEGORIES[0]}_00_copy.jpg"}
    return written


def write_saturation_remover(path: Path, steepness: float = 10.0, threshold: float = 1.0) -> Path:
    """A ``u2net_custom`` ONNX remover: ``sigmoid(steepness * (max_c x - min_c x - threshold))`` of the
    normalised input, so saturated pixels are object and grey ones background."""
    import onnx
    from onnx import TensorProto, helper

    side = 320
    nodes = [
        helper.make_node("ReduceMax", ["input.1"], ["high"], axes=[1], keepdims=1),
        helper.make_node("ReduceMin", ["input.1"], ["low"], axes=[1], keepdims=1),
        helper.make_node("Sub", ["high", "low"], ["spread"]),
        helper.make_node("Sub", ["spread", "threshold"], ["shifted"]),
        helper.make_node("Mul", ["shifted", "steepness"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["mask"]),
    ]
    constants = [helper.make_tensor("threshold", TensorProto.FLOAT, [], [threshold]),
                 helper.make_tensor("steepness", TensorProto.FLOAT, [], [steepness])]
    graph = helper.make_graph(
        nodes, "saturation-remover", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, side, side])],
        [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, side, side])], constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path
