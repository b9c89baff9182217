"""The labelling sheet of a curation nobody labelled yet: a CSV to fill in and one contact sheet per category.

The CSV has one row per image (``path,category,number,avg_similarity,text_similarity,label``,
``label`` blank); filled with ``good`` or ``bad`` it is the ``--labels`` file of the next run.
A contact sheet shows a category's images in a grid, each numbered as its CSV row's ``number``,
sorted by average similarity (the likeliest outliers first), so a person labels a category at
a glance; a category of more than :data:`PAGE` images gets several sheets.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from rf100vl_hf.uouo.features import FEATURES
from rf100vl_hf.uouo.rawimages import RawImage, decode_rgb

SHEET = "labels.csv"
THUMB = 160
COLUMNS = 8
LABEL_BAND = 18
PAGE = 96
"""Images per contact sheet (12 rows): a category of thousands gets several pages, ``<category>-page2.jpg``..."""


def contact_sheet(images: list[RawImage], numbers: list[int], title: str) -> Image.Image:
    """A grid of thumbnails of ``images``, each captioned with its number."""
    rows = max(1, math.ceil(len(images) / COLUMNS))
    cell = THUMB + LABEL_BAND
    sheet = Image.new("RGB", (COLUMNS * THUMB, LABEL_BAND + rows * cell), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    draw.text((4, 2), title, fill=(0, 0, 0), font=font)
    for slot, (image, number) in enumerate(zip(images, numbers)):
        thumb = decode_rgb(image, THUMB - 6)  # a white gap between cells
        x, y = (slot % COLUMNS) * THUMB, LABEL_BAND + (slot // COLUMNS) * cell
        sheet.paste(thumb, (x + (THUMB - thumb.width) // 2, y + LABEL_BAND + (THUMB - thumb.height) // 2))
        draw.text((x + 4, y + 2), f"#{number}", fill=(200, 0, 0), font=font)
    return sheet


def write_labelling(folder: Path, categories: dict[str, list[RawImage]], features: dict[str, np.ndarray]) -> Path:
    """The sheet (CSV) and each category's contact sheet (``<category>.jpg``) in ``folder``; the CSV's path."""
    folder.mkdir(parents=True, exist_ok=True)
    average, text = FEATURES.index("avg_similarity"), FEATURES.index("text_similarity")
    with (folder / SHEET).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["path", "category", "number", "avg_similarity", "text_similarity", "label"])
        for name in sorted(categories):
            order = np.argsort(features[name][:, average], kind="stable")
            images = [categories[name][i] for i in order]
            numbers = list(range(1, len(images) + 1))
            for number, index in zip(numbers, order):
                row = features[name][index]
                writer.writerow([categories[name][index].source_id, name, number, f"{row[average]:.4f}",
                                 f"{row[text]:.4f}", ""])
            for start in range(0, len(images), PAGE):
                end = min(start + PAGE, len(images))
                title = f"{name}: images {start + 1}-{end} of {len(images)}, lowest average similarity first"
                file = f"{name}.jpg" if start == 0 else f"{name}-page{start // PAGE + 1}.jpg"
                contact_sheet(images[start:end], numbers[start:end], title).save(folder / file, quality=85)
    return folder / SHEET
