"""Predictions against ground truth on a few images of a pair, as PNG: the picture to look at
when a score looks wrong.

Ground-truth boxes are green; a prediction is blue when pycocotools matches it to a box at IoU
0.5, orange when it matches none, grey when it matched a crowd box (not scored). Each box carries
its class (and a prediction its score). Only predictions scoring at least ``min_score`` are
drawn (at most :data:`MAX_PREDICTIONS` per image, the best); the caption says how many that
left out. Small images are enlarged so that labels stay legible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics.resample import IGNORED, MATCHED
from rf100vl_hf.results.defaults import MIN_SCORE
from rf100vl_hf.results.pairs import Split, describe, load_split, located_rows, matched, predictions_path, row_split

GROUND_TRUTH = (0, 158, 115)
COLOURS = {MATCHED: (86, 180, 233), IGNORED: (150, 150, 150)}
UNMATCHED_COLOUR = (213, 94, 0)
"""Bluish green, sky blue, vermillion and grey: told apart with any colour vision (Okabe and Ito)."""
MAX_PREDICTIONS = 100
MIN_SIDE = 640
"""Images are enlarged until their longer side has at least this many pixels."""


@dataclass(frozen=True)
class Pair:
    """What is drawn: the split, the predictions file, and how to name it in captions."""

    dataset: str
    split: Split
    predictions: Path
    label: str


def pair_of(source: Path, dataset: str, model: str | None = None, split: str = "test",
            data_dir: Path | None = None, fewshot_dir: Path | None = None) -> Pair:
    """The pair to draw: from a results folder (its row of ``dataset``, of ``model`` when it
    holds several), or a COCO results file scored against ``split`` of ``dataset``."""
    source = Path(source)
    if source.is_file() and source.suffix == ".json":
        return Pair(dataset, load_split(dataset, split, data_dir, fewshot_dir), source,
                    f"{source.name} on {dataset} ({split})")
    folder, rows = located_rows(source)
    chosen = [row for row in rows
              if row.get("dataset") == dataset and model in (None, row.get("spec"), row.get("model"))]
    if len(chosen) != 1:
        what = f"rows of {dataset}" + (f" and model {model}" if model else "")
        found = ", ".join(describe(row) for row in (chosen or rows)) or "none"
        advice = "choose one with --model" if chosen else "RF100-VL rows found"
        raise DataError(folder, "--dataset" if not chosen else "--model", f"{len(chosen)} {what} ({advice}: {found})")
    (row,) = chosen
    return Pair(dataset, row_split(row, data_dir, fewshot_dir), predictions_path(row, folder), describe(row))


def draw(pair: Pair, out: Path, images: int = 8, image_ids: Sequence[int] = (), min_score: float = MIN_SCORE,
         progress: bool = True) -> list[Path]:
    """Draw ``image_ids`` (default: the first ``images`` of the split) into ``out``, one PNG
    each, named ``<dataset>-<image id>.png``; the paths written."""
    import datasets

    from rf100vl_hf.progress import progress_bar

    matches, records = matched(pair.predictions, pair.split)
    rows = pair.split.dataset.cast_column("image", datasets.Image(decode=False))  # decoded as the runner does
    position = {int(image_id): index for index, image_id in enumerate(rows["image_id"])}
    unknown = [i for i in image_ids if i not in position]
    if unknown:
        shown = ", ".join(map(str, list(position)[:10]))
        raise DataError(pair.label, "--image-id", f"{unknown[0]} is not an image of the split (its first ids: {shown})")
    chosen = list(image_ids) or list(position)[:images]
    by_image: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for index, record in enumerate(records):
        by_image.setdefault(int(record["image_id"]), []).append((index, record))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for image_id in progress_bar(chosen, desc="drawing", disable=not progress):
        row = rows[position[image_id]]
        picture = _picture(row, by_image.get(image_id, []), matches.outcomes, pair, min_score)
        path = out / f"{pair.dataset}-{image_id}.png"
        picture.save(path)
        written.append(path)
    return written


def _picture(row: dict[str, Any], predictions: list[tuple[int, dict[str, Any]]], outcomes: dict[int, str],
             pair: Pair, min_score: float) -> Any:
    """One image with its boxes, enlarged when small, above a caption."""
    from PIL import Image, ImageDraw

    from rf100vl_hf.images import open_rgb

    image = open_rgb(row["image"]["bytes"] or Path(row["image"]["path"]).read_bytes())
    scale = max(1.0, MIN_SIDE / max(image.size))
    if scale > 1:
        image = image.resize((round(image.width * scale), round(image.height * scale)), Image.Resampling.BILINEAR)
    canvas = ImageDraw.Draw(image)
    font = _font(max(12, image.width // 60))
    width = max(2, image.width // 320)
    classes, category_of = pair.split.classes, dict(zip(pair.split.category_ids, pair.split.classes))
    objects = row["objects"]
    for bbox, category in zip(objects["bbox"], objects["category"]):
        _box(canvas, bbox, scale, GROUND_TRUTH, classes[category], font, width, below=True)
    shown = sorted((p for p in predictions if p[1]["score"] >= min_score), key=lambda p: -p[1]["score"])
    for index, record in shown[:MAX_PREDICTIONS]:
        colour = COLOURS.get(outcomes.get(index, ""), UNMATCHED_COLOUR)
        label = f"{category_of[record['category_id']]} {record['score']:.2f}"
        _box(canvas, record["bbox"], scale, colour, label, font, width, below=False)
    caption = [
        f"{pair.label}: image {row['image_id']} ({row.get('file_name', '')})",
        f"green: ground truth ({len(objects['bbox'])}); blue: prediction matching a box at IoU 0.5, orange: "
        f"matching none, grey: matching a crowd box; {min(len(shown), MAX_PREDICTIONS)} of {len(predictions)} "
        f"predictions shown (score >= {min_score:g})",
    ]
    return _with_caption(image, caption, font)


def _box(canvas: Any, bbox: Sequence[float], scale: float, colour: tuple[int, int, int], label: str, font: Any,
         width: int, below: bool) -> None:
    """A COCO ``[x, y, w, h]`` box with its label on a filled tag (ground truth's tag inside the
    box's top, predictions' above it, so the two rarely cover each other)."""
    x, y, w, h = (float(v) * scale for v in bbox)
    canvas.rectangle([x, y, x + w, y + h], outline=colour, width=width)
    left, top, right, bottom = canvas.textbbox((0, 0), label, font=font)
    tag_w, tag_h = right - left + 4, bottom - top + 4
    tag_x = max(0.0, min(x, canvas.im.size[0] - tag_w))  # the whole tag inside the picture
    tag_y = y if below else max(0.0, y - tag_h)
    canvas.rectangle([tag_x, tag_y, tag_x + tag_w, tag_y + tag_h], fill=colour)
    light = sum(weight * value for weight, value in zip((0.299, 0.587, 0.114), colour)) > 150
    canvas.text((tag_x + 2 - left, tag_y + 2 - top), label, fill=(0, 0, 0) if light else (255, 255, 255), font=font)


def _with_caption(image: Any, paragraphs: list[str], font: Any) -> Any:
    """The image above a white band holding the text, wrapped to the image's width."""
    from PIL import Image, ImageDraw

    measure = ImageDraw.Draw(image)
    lines = [line for paragraph in paragraphs for line in _wrapped(paragraph, measure, font, image.width - 12)]
    step = measure.textbbox((0, 0), "Ag", font=font)[3] + 6
    framed = Image.new("RGB", (image.width, image.height + step * len(lines) + 8), (255, 255, 255))
    framed.paste(image, (0, 0))
    canvas = ImageDraw.Draw(framed)
    for number, line in enumerate(lines):
        canvas.text((6, image.height + 4 + number * step), line, fill=(0, 0, 0), font=font)
    return framed


def _wrapped(text: str, measure: Any, font: Any, width: int) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and measure.textlength(f"{lines[-1]} {word}", font=font) <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)
