"""Reading boxes and quadrant words out of what a vision-language model wrote.

Models that answer in text rarely answer cleanly: JSON arrives in code fences, wrapped in
prose, cut off at the token limit, with single quotes, ``NaN`` or ``None`` in it, or as a
bare ``[x1, y1, x2, y2]`` in a sentence; Florence-2 and PaliGemma write location tokens
instead. These pure functions recover every box that can be read and count the ones that
cannot, so a bad answer lowers a score visibly instead of crashing a run or vanishing.

Boxes come back in the answer's own coordinate space (pixels of a resized input, 0..1000,
location bins...) as ``x1, y1, x2, y2`` with the corners put in order; each adapter turns
them into pixels of its image.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from rf100vl_hf.metrics.grounding import QUADRANTS  # the four answers, as the scorer spells them

BOX_KEYS = ("bbox_2d", "box_2d", "bbox", "box", "bounding_box")
"""Keys whose value is read as a box ``[x1, y1, x2, y2]`` (or a list of such boxes)."""

LABEL_KEYS = ("label", "name", "category", "class", "object")
"""Keys whose value is read as the box's label, the first one present winning."""
SCORE_KEYS = ("score", "confidence")
"""Keys whose value is read as the box's own score (asked for with the chat adapters' ``scores=ask``)."""


@dataclass(frozen=True)
class ParsedBox:
    """One box of an answer: ``x1 <= x2``, ``y1 <= y2`` in the answer's coordinate space."""

    box: tuple[float, float, float, float]
    label: str | None = None
    score: float | None = None
    """The score the answer gave the box (a finite number), if any."""


@dataclass(frozen=True)
class BoxParse:
    """The boxes an answer held, in the order written, and how many box-like entries could
    not be read (a ``NaN`` or ``None`` coordinate, three numbers instead of four...)."""

    boxes: list[ParsedBox] = field(default_factory=list)
    rejected: int = 0


# ----------------------------------------------------------------------------- JSON answers

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.S)
_DOUBLE_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_SINGLE_QUOTED = r"'([^']*)'"
_KEY = r"""(?:"{key}"|'{key}'|\b{key}\b)\s*:\s*"""
_NUMBER_LIST = re.compile(r"\[([^\[\]{}]*)\]")
_NESTED_LIST = re.compile(r"\[\s*((?:\[[^\[\]{}]*\]\s*,?\s*)+)\]")


def _unfenced(text: str) -> str:
    """The inside of the code fences of an answer (all of them, in order), else the answer."""
    blocks = [match.group(1) for match in _FENCE.finditer(text)]
    return "\n".join(blocks) if blocks else text


def _objects(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Spans of the complete ``{...}`` objects that hold no other object, and of the regions
    inside any object (outermost spans, plus the tail of an object a truncated answer left
    open). Braces in strings do not count; an unclosed object yields no object span."""
    innermost: list[tuple[int, int]] = []
    regions: list[tuple[int, int]] = []
    stack: list[tuple[int, bool]] = []  # (start, holds a nested object)
    quote: str | None = None
    escaped = False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char in "\"'" and stack and not _is_apostrophe(text, index):
            quote = char
        elif char == "{":
            if stack:
                stack[-1] = (stack[-1][0], True)
            stack.append((index, False))
        elif char == "}" and stack:
            start, nested = stack.pop()
            if not nested:
                innermost.append((start, index + 1))
            if not stack:
                regions.append((start, index + 1))
    if stack:
        regions.append((stack[0][0], len(text)))
    return innermost, regions


def _is_apostrophe(text: str, index: int) -> bool:
    """A single quote between two letters (``driver's``) opens no string."""
    return text[index] == "'" and 0 < index < len(text) - 1 and text[index - 1].isalnum() and text[index + 1].isalnum()


def _number(token: str) -> float | None:
    """A coordinate, or ``None`` for anything that is not a finite number (NaN, None, null, '')."""
    token = token.strip().strip("\"'").strip()
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _box(inner: str) -> tuple[float, float, float, float] | None:
    """The box written as the inside of a list, corners ordered; ``None`` unless four finite numbers."""
    values = [_number(token) for token in inner.split(",")]
    if len(values) != 4 or any(value is None for value in values):
        return None
    x1, y1, x2, y2 = values  # type: ignore[misc]
    return (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2))


def _label(obj: str) -> str | None:
    for key in LABEL_KEYS:
        pattern = _KEY.format(key=re.escape(key))
        match = re.search(pattern + _DOUBLE_QUOTED, obj)
        if match:
            try:
                return json.loads(f'"{match.group(1)}"').strip()
            except json.JSONDecodeError:
                return match.group(1).strip()
        match = re.search(pattern + _SINGLE_QUOTED, obj)
        if match:
            return match.group(1).strip()
    return None


def _score(obj: str) -> float | None:
    """The first of :data:`SCORE_KEYS` whose value is a finite number (quoted or not)."""
    for key in SCORE_KEYS:
        match = re.search(_KEY.format(key=re.escape(key)) + r"""("[^"]*"|'[^']*'|[^,}\]]+)""", obj)
        if match:
            return _number(match.group(1))
    return None


def _boxes_of_object(obj: str) -> tuple[list[ParsedBox], int] | None:
    """Boxes of one ``{...}`` object: its box key's list, or list of lists; ``None`` if it has no box key."""
    for key in BOX_KEYS:
        match = re.search(_KEY.format(key=re.escape(key)), obj)
        if not match:
            continue
        rest = obj[match.end() :]
        nested = _NESTED_LIST.match(rest)
        if nested:
            inners = [m.group(1) for m in _NUMBER_LIST.finditer(nested.group(1))]
        else:
            flat = _NUMBER_LIST.match(rest)
            inners = [flat.group(1)] if flat else []
        label, score = _label(obj), _score(obj)
        boxes = [_box(inner) for inner in inners]
        found = [ParsedBox(box, label, score) for box in boxes if box is not None]
        return found, len(boxes) - len(found) + (0 if inners else 1)
    return None


def _looks_like_box(inner: str) -> bool:
    """A bare list is taken for a box when it has four entries and at least one is a number."""
    tokens = inner.split(",")
    return len(tokens) == 4 and any(_number(token) is not None for token in tokens)


def parse_json_boxes(text: str) -> BoxParse:
    """Boxes of a JSON-style answer (Qwen's ``[{"bbox_2d": [x1, y1, x2, y2], "label": ...}]``).

    Reads objects with any of :data:`BOX_KEYS` (label from :data:`LABEL_KEYS`), whether the
    answer is fenced, wrapped in prose, single-quoted or truncated (complete objects are
    kept, the open one is dropped), then bare four-number lists outside those objects
    (``[[x1, y1, x2, y2], ...]`` or ``[x1, y1, x2, y2]`` in a sentence) as unlabelled boxes;
    lists inside objects without a box key are not boxes.
    A box with a coordinate that is not a finite number is rejected and counted.
    """
    body = _unfenced(text)
    objects, inside = _objects(body)
    found: list[tuple[int, ParsedBox]] = []
    rejected = 0
    for start, end in objects:
        result = _boxes_of_object(body[start:end])
        if result is None:
            continue
        boxes, bad = result
        found.extend((start, box) for box in boxes)
        rejected += bad
    for match in _NUMBER_LIST.finditer(body):
        if any(start <= match.start() < end for start, end in inside) or not _looks_like_box(match.group(1)):
            continue
        box = _box(match.group(1))
        if box is None:
            rejected += 1
        else:
            found.append((match.start(), ParsedBox(box)))
    found.sort(key=lambda pair: pair[0])
    return BoxParse([box for _, box in found], rejected)


# ------------------------------------------------------------------------- location tokens

_FLORENCE_LOC = re.compile(r"<loc_(\d+)>")
_FLORENCE_SEGMENT = re.compile(r"([^<]*)((?:<loc_\d+>|<poly>|</poly>|<sep>)+)")
_FLORENCE_MARKUP = re.compile(r"</?s>|<pad>|</?od>|</?ground>|<obj>|</?box>|</?bbox>")


def parse_florence_locations(text: str) -> BoxParse:
    """Boxes of a Florence-2 answer: ``label<loc_x1><loc_y1><loc_x2><loc_y2>...`` over 1000 bins.

    Every run of four location tokens after a phrase is one box of that phrase (a phrase
    may own several boxes, as in phrase grounding); a ``<poly>`` run is read as the box
    around its points. A run whose length is not a multiple of four is rejected and
    counted. Values are bin indices (0..999), ``x`` first.
    """
    body = _FLORENCE_MARKUP.sub("", text)
    found: list[ParsedBox] = []
    rejected = 0
    label: str | None = None
    for match in _FLORENCE_SEGMENT.finditer(body):
        phrase = match.group(1).strip()
        label = phrase or label
        run = match.group(2)
        if "<poly>" in run:
            for polygon in re.findall(r"<poly>(.*?)(?:</poly>|$)", run):
                values = [int(v) for v in _FLORENCE_LOC.findall(polygon)]
                if len(values) < 4 or len(values) % 2:
                    rejected += 1
                    continue
                xs, ys = values[0::2], values[1::2]
                found.append(ParsedBox((min(xs), min(ys), max(xs), max(ys)), label))
            continue
        values = [float(v) for v in _FLORENCE_LOC.findall(run)]
        if len(values) % 4:
            rejected += 1
        for i in range(0, len(values) - len(values) % 4, 4):
            x1, y1, x2, y2 = values[i : i + 4]
            found.append(ParsedBox((min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)), label))
    return BoxParse(found, rejected)


_PALIGEMMA_OBJECT = re.compile(r"((?:<loc\d{4}>)+)\s*([^;<]*)")


def parse_paligemma_locations(text: str) -> BoxParse:
    """Boxes of a PaliGemma ``detect`` answer: ``<locY1><locX1><locY2><locX2> label ; ...``.

    Values are bin indices over 1024 bins, written ``y`` first; they come back reordered as
    ``x1, y1, x2, y2``. A group of other than four tokens is rejected and counted.
    """
    found: list[ParsedBox] = []
    rejected = 0
    for match in _PALIGEMMA_OBJECT.finditer(text):
        values = [float(v) for v in re.findall(r"<loc(\d{4})>", match.group(1))]
        if len(values) != 4:
            rejected += 1
            continue
        y1, x1, y2, x2 = values
        label = match.group(2).strip() or None
        found.append(ParsedBox((min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)), label))
    return BoxParse(found, rejected)


# --------------------------------------------------------------------------- quadrants

_VERTICAL = {"top": "top", "upper": "top", "bottom": "bottom", "lower": "bottom"}
_QUADRANT_WORD = re.compile(
    r"\b(top|upper|bottom|lower)[\s_-]*(left|right)\b|\b(left|right)[\s_-]*(top|upper|bottom|lower)\b", re.I
)
_DIGIT_BEFORE = re.compile(r"(?:\(\s*([1-4])\s*\)|\b([1-4])\s*(?:[:=).]|-|for|means|is)?)\s*(?:the\s+)?$", re.I)
_DIGIT_AFTER = re.compile(r"^\s*(?:quadrant)?\s*(?:\(\s*([1-4])\s*\)|(?:[:=]|is|->|-)\s*([1-4])\b)", re.I)


def _quadrant_mentions(text: str) -> list[re.Match[str]]:
    return list(_QUADRANT_WORD.finditer(text))


def _quadrant_of(match: re.Match[str]) -> str:
    """The quadrant a mention names, spelled as the scorer spells it (cells in reading order)."""
    vertical, horizontal = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
    return QUADRANTS[2 * (_VERTICAL[vertical.lower()] == "bottom") + (horizontal.lower() == "right")]


def _numbering(prompt: str, side: str) -> dict[str, str] | None:
    """Digit -> quadrant from the digits written on one side of each quadrant word; ``None``
    when a digit would name two quadrants."""
    numbering: dict[str, str] = {}
    for match in _quadrant_mentions(prompt):
        if side == "before":
            hit = _DIGIT_BEFORE.search(prompt[max(0, match.start() - 12) : match.start()])
        else:
            hit = _DIGIT_AFTER.search(prompt[match.end() : match.end() + 16])
        if not hit:
            continue
        digit, quadrant = hit.group(1) or hit.group(2), _quadrant_of(match)
        if numbering.setdefault(digit, quadrant) != quadrant:
            return None
    return numbering


def quadrant_numbering(prompt: str) -> dict[str, str]:
    """The digits a prompt assigns to quadrants (``"1: top-left, 2: top-right..."``, ``"(1) top
    left"``, ``"top-left = 1"``); empty when it assigns none or cannot be read one way.

    Digits are read on the side of the quadrant words that numbers more of them
    consistently, so ``"(1) top-left (2) top-right"`` is not misread as ``top-left = 2``.
    """
    before, after = _numbering(prompt, "before"), _numbering(prompt, "after")
    candidates = [numbering for numbering in (before, after) if numbering]
    if not candidates:
        return {}
    best = max(len(numbering) for numbering in candidates)
    winners = [numbering for numbering in candidates if len(numbering) == best]
    return winners[0] if len(winners) == 1 or winners[0] == winners[1] else {}


def parse_quadrant(text: str, prompt: str | None = None) -> str | None:
    """The quadrant word an answer names, as one of :data:`QUADRANTS`, else ``None``.

    Accepts any case and spacing ("Top-Left", "top left", "upper left", "the top-left
    quadrant", "left top"). An answer naming two different quadrants is ambiguous and
    reads as ``None``. A bare digit 1-4 is read only when ``prompt`` numbers the quadrants
    (see :func:`quadrant_numbering`).
    """
    named = {_quadrant_of(match) for match in _quadrant_mentions(text)}
    if len(named) == 1:
        return named.pop()
    if named or not prompt:
        return None
    numbering = quadrant_numbering(prompt)
    digits = set(re.findall(r"(?<![\d.])([1-4])(?!\.?\d)", text))
    if len(digits) == 1 and numbering:
        return numbering.get(digits.pop())
    return None
