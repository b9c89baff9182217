"""Predictions against ground truth on a few images of a pair, as PNG: the picture to look at
when a score looks wrong.

Boxes are coloured by what went right or wrong (``docs/errors.md``), with a legend under the
image: a prediction pycocotools matches to a box at IoU 0.5 is blue, one that matches none has
the colour of its TIDE error type (classification, localisation, both, duplicate, background:
:func:`rf100vl_hf.metrics.errors.image_errors`), one that matched a crowd box (not scored) grey;
ground-truth boxes are green when found, reddish purple when missed. Each box carries its
class (and a prediction its score). Only predictions scoring at least ``min_score`` are
drawn (at most :data:`MAX_PREDICTIONS` per image, the best); the caption says how many that
left out. Small images are enlarged so that labels stay legible.

With ``replies`` (``rf100vl-hf draw --option replies=true``), a pair run with the ``log-samples`` key also
shows what its model wrote: each picture's caption quotes the start of each raw reply, and
``<dataset>-<image id>.reply.txt`` beside it holds the image's whole line of the samples log,
laid out to read (texts sent, replies, the boxes read and why any was dropped or repaired).
A reply is the model's text, whatever it holds: both show a control character (an ANSI
escape, a NUL) and a lone surrogate as its escape (:func:`rf100vl_hf.controls.visible`), so
the file is neither obeyed by a terminal nor unwritable, and the caption draws no box glyphs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rf100vl_hf.controls import one_line, visible
from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics.errors import ERROR_NAMES, TRUE_POSITIVE, image_errors
from rf100vl_hf.metrics.resample import IGNORED, MATCHED
from rf100vl_hf.progress import progress_bar
from rf100vl_hf.results.defaults import MIN_SCORE
from rf100vl_hf.results.folder import SAMPLES_SUFFIX
from rf100vl_hf.results.predictions import (
    Split,
    describe,
    load_split,
    located_rows,
    matched,
    predictions_path,
    row_split,
)

GROUND_TRUTH = (0, 158, 115)
MISSED = (204, 121, 167)
COLOURS = {TRUE_POSITIVE: (0, 114, 178), "cls": (230, 159, 0), "loc": (86, 180, 233), "both": (0, 0, 0),
           "dupe": (240, 228, 66), "bkg": (213, 94, 0), IGNORED: (150, 150, 150)}
"""A prediction's colour by what it is; with the ground truth's two, Okabe and Ito's eight colours
(told apart with any colour vision) and grey."""
LEGEND = [(GROUND_TRUTH, "ground truth found"), (MISSED, "missed"), (COLOURS[TRUE_POSITIVE], "true positive"),
          *((COLOURS[name], f"{ERROR_NAMES[name]} error") for name in ("cls", "loc", "both", "dupe", "bkg")),
          (COLOURS[IGNORED], "on a crowd box")]
MAX_PREDICTIONS = 100
QUOTED_REPLY = 240
"""Characters of a raw reply a caption quotes (the ``.reply.txt`` beside it holds it all)."""
QUOTED_REPLIES = 3
"""Replies a caption quotes (one prompt per class makes many; the ``.reply.txt`` has them all)."""
MIN_SIDE = 640
"""Images are enlarged until their longer side has at least this many pixels."""


@dataclass(frozen=True)
class Pair:
    """What is drawn: the split, the predictions file, how to name it in captions, the samples
    log beside the predictions (``None`` when the pair was run without one), and the files of
    the row's label-error candidates (``docs/errors.md``)."""

    dataset: str
    split: Split
    predictions: Path
    label: str
    samples: Path | None = None
    label_errors: tuple[str, ...] = ()


def pair_of(source: Path, dataset: str, model: str | None = None, split: str = "test",
            data_dir: Path | None = None, fewshot_dir: Path | None = None) -> Pair:
    """The pair to draw: from a results folder (its row of ``dataset``, of ``model`` when it
    holds several), or a COCO results file scored against ``split`` of ``dataset``."""

    source = Path(source)
    if source.is_file() and source.suffix == ".json":
        beside = source.with_name(source.stem + SAMPLES_SUFFIX)
        return Pair(dataset, load_split(dataset, split, data_dir, fewshot_dir), source,
                    f"{source.name} on {dataset} ({split})", beside if beside.is_file() else None)
    folder, rows = located_rows(source)
    chosen = [row for row in rows
              if row.data.dataset == dataset and model in (None, row.model.spec, row.model.model)]
    if len(chosen) != 1:
        what = f"rows of {dataset}" + (f" and model {model}" if model else "")
        found = ", ".join(describe(row) for row in (chosen or rows)) or "none"
        advice = "choose one with --model" if chosen else "RF100-VL rows found"
        raise DataError(folder, "--dataset" if not chosen else "--model", f"{len(chosen)} {what} ({advice}: {found})")
    (row,) = chosen
    samples = predictions_path(row, folder, "samples_file") if row.output.samples_file else None
    return Pair(dataset, row_split(row, data_dir, fewshot_dir), predictions_path(row, folder), describe(row), samples,
                tuple(row.errors.label_error_files or ()))


def read_samples(pair: Pair) -> dict[int, dict[str, Any]]:
    """Image id -> the image's line of the pair's samples log; an error saying how to make one
    when the pair has none."""
    if pair.samples is None:
        raise DataError(pair.label, "--option replies", "the pair has no samples log: run it with log-samples on "
                        "(a model that answers in text)")
    lines: dict[int, dict[str, Any]] = {}
    for number, text in enumerate(pair.samples.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            line = json.loads(text)
            lines[int(line["image_id"])] = line
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(pair.samples, f"line {number}", f"not a line of a samples log ({exc})") from None
    return lines


def reply_text(line: dict[str, Any]) -> str:
    """An image's line of the samples log laid out to read."""
    cached = ", answered from the answer cache" if line.get("from_cache") else ""
    out = [f"image {line['image_id']} ({line.get('file_name', '')}){cached}"]
    if line.get("error"):
        out.append(f"the model failed on it: {line['error']}")
    transcript = line.get("transcript")
    if transcript is None and not line.get("error"):
        out.append("(no transcript: the answer was cached before transcripts were kept)")
    for number, question in enumerate(transcript or [], start=1):
        cut = question.get("reply_cut")
        said = f"reply (its first {cut['kept']} of {cut['of']} characters):" if cut else "reply:"
        out += ["", f"--- question {number}", "sent:", *(f"  {text}" for text in question["sent"]), said,
                *(f"  {text}" for text in question["reply"].splitlines() or [""])]
        if question.get("question") == "vqa":  # a box's yes/no question (scores=vqa)
            out.append(f"box score: {question['score']:g}")
            continue
        boxes = question.get("boxes", [])
        unreadable = question.get("unreadable_boxes", 0)
        out.append(f"boxes read: {len(boxes)}" + (f" ({unreadable} more could not be read)" if unreadable else ""))
        for box in boxes:
            went = (f"dropped: {box['dropped']}" if box.get("dropped")
                    else f"-> {box['class']}" if "class" in box else "")
            out.append(f"  - {box['label']!r} written {box['written']}, pixels {box['pixels']} {went}".rstrip())
    repairs = {name: count for name, count in (line.get("repairs") or {}).items() if count}
    out += ["", f"detections scored: {len(line.get('detections', []))}"
            + (f"; repaired: {', '.join(f'{name} {count}' for name, count in repairs.items())}" if repairs else "")]
    return visible("\n".join(out), multiline=True) + "\n"


def _quoted(line: dict[str, Any] | None) -> list[str]:
    """Caption lines quoting the start of each reply of an image's samples line."""
    if line is None:
        return ["no line of the samples log for this image"]
    replies = [one_line(question["reply"]) for question in line.get("transcript") or []]
    quoted = [f"reply {number}: {reply[:QUOTED_REPLY]}" + ("..." if len(reply) > QUOTED_REPLY else "")
              for number, reply in enumerate(replies[:QUOTED_REPLIES], start=1)]
    if len(replies) > QUOTED_REPLIES:
        quoted.append(f"and {len(replies) - QUOTED_REPLIES} more replies")
    return quoted or ["no reply" + (f": {one_line(line['error'])}" if line.get("error") else " kept for this image")]


def draw(pair: Pair, out: Path, images: int = 8, image_ids: Sequence[int] = (), min_score: float = MIN_SCORE,
         progress: bool = True, replies: bool = False, label_errors: bool = False) -> list[Path]:
    """Draw ``image_ids`` (with ``label_errors``: the images of the row's label-error candidates;
    default: the first ``images`` of the split) into ``out``, one PNG each, named
    ``<dataset>-<image id>.png``; with ``replies`` each caption quotes the model's replies and
    ``<dataset>-<image id>.reply.txt`` holds them (see the module docstring). The paths written."""
    import datasets


    samples = read_samples(pair) if replies else None
    matches, records = matched(pair.predictions, pair.split)
    rows = pair.split.dataset.cast_column("image", datasets.Image(decode=False))  # decoded as the runner does
    position = {int(image_id): index for index, image_id in enumerate(rows["image_id"])}
    if label_errors:
        if not pair.label_errors:
            raise DataError(pair.label, "label_error_files", "the row names no label-error candidates (a row scored "
                            "before the error analysis, or none was found)")
        by_file = {str(name): int(image_id) for name, image_id in zip(rows["file_name"], rows["image_id"])}
        unknown_files = [name for name in pair.label_errors if name not in by_file]
        if unknown_files:
            raise DataError(pair.label, "label_error_files", f"{unknown_files[0]} is not a file of the split")
        image_ids = [by_file[name] for name in pair.label_errors]
    unknown = [i for i in image_ids if i not in position]
    if unknown:
        shown = ", ".join(map(str, list(position)[:10]))
        raise DataError(pair.label, "--option image-id", f"{unknown[0]} is not an image of the split (its first ids: {shown})")
    chosen = list(image_ids) or list(position)[:images]
    by_image: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for index, record in enumerate(records):
        by_image.setdefault(int(record["image_id"]), []).append((index, record))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for image_id in progress_bar(chosen, desc="drawing", disable=not progress):
        row = rows[position[image_id]]
        quoted = [] if samples is None else _quoted(samples.get(image_id))
        picture = _picture(row, by_image.get(image_id, []), matches.outcomes, pair, min_score, quoted)
        path = out / f"{pair.dataset}-{image_id}.png"
        picture.save(path)
        written.append(path)
        if samples is not None and image_id in samples:
            text = out / f"{pair.dataset}-{image_id}.reply.txt"
            text.write_text(reply_text(samples[image_id]), encoding="utf-8")
            written.append(text)
    return written


def _picture(row: dict[str, Any], predictions: list[tuple[int, dict[str, Any]]], outcomes: dict[int, str],
             pair: Pair, min_score: float, quoted: list[str]) -> Any:
    """One image with its boxes, enlarged when small, above a caption (ending with ``quoted``)."""
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
    class_of = dict(zip(pair.split.category_ids, range(len(classes))))
    objects = row["objects"]
    types, found = image_errors(
        np.asarray(objects["bbox"], dtype=np.float64), np.asarray(objects["category"]),
        np.asarray([record["bbox"] for _, record in predictions], dtype=np.float64),
        np.asarray([class_of[record["category_id"]] for _, record in predictions]),
        np.asarray([outcomes.get(index) == MATCHED for index, _ in predictions]))
    for bbox, category, hit in zip(objects["bbox"], objects["category"], found.tolist()):
        _box(canvas, bbox, scale, GROUND_TRUTH if hit else MISSED, classes[category], font, width, below=True)
    kind = {index: IGNORED if outcomes.get(index) == IGNORED else what
            for (index, _), what in zip(predictions, types)}
    shown = sorted((p for p in predictions if p[1]["score"] >= min_score), key=lambda p: -p[1]["score"])
    for index, record in shown[:MAX_PREDICTIONS]:
        label = f"{category_of[record['category_id']]} {record['score']:.2f}"
        _box(canvas, record["bbox"], scale, COLOURS[kind[index]], label, font, width, below=False)
    caption = [
        f"{pair.label}: image {row['image_id']} ({row.get('file_name', '')})",
        f"{int(found.sum())} of {len(objects['bbox'])} ground-truth boxes found; "
        f"{min(len(shown), MAX_PREDICTIONS)} of {len(predictions)} predictions shown (score >= {min_score:g}), "
        "coloured by TIDE's error types at IoU 0.5 (background below 0.1)",
        *quoted,
    ]
    return _with_caption(image, caption, font, LEGEND)


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


def _with_caption(image: Any, paragraphs: list[str], font: Any,
                  legend: Sequence[tuple[tuple[int, int, int], str]] = ()) -> Any:
    """The image above a white band holding the legend (a swatch before each name, wrapped) and
    the text, wrapped to the image's width."""
    from PIL import Image, ImageDraw

    measure = ImageDraw.Draw(image)
    lines = [line for paragraph in paragraphs for line in _wrapped(paragraph, measure, font, image.width - 12)]
    step = measure.textbbox((0, 0), "Ag", font=font)[3] + 6
    swatch = step - 6
    places, x, legend_rows = [], 6.0, 0
    for colour, name in legend:
        wide = swatch + 4 + measure.textlength(name, font=font) + 14
        if places and x + wide > image.width - 6:
            x, legend_rows = 6.0, legend_rows + 1
        places.append((x, legend_rows, colour, name))
        x += wide
    rows = legend_rows + 1 if legend else 0
    framed = Image.new("RGB", (image.width, image.height + step * (len(lines) + rows) + 8), (255, 255, 255))
    framed.paste(image, (0, 0))
    canvas = ImageDraw.Draw(framed)
    for left, row, colour, name in places:
        top = image.height + 4 + row * step
        canvas.rectangle([left, top + 1, left + swatch, top + 1 + swatch], fill=colour, outline=(0, 0, 0))
        canvas.text((left + swatch + 4, top), name, fill=(0, 0, 0), font=font)
    for number, line in enumerate(lines):
        canvas.text((6, image.height + 4 + (rows + number) * step), line, fill=(0, 0, 0), font=font)
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
