"""The answer parsers on a table of real-looking answers, broken ones included."""

from __future__ import annotations

import pytest

from pytest_rf100vl.adapters.parsing import (
    ParsedBox,
    parse_florence_locations,
    parse_json_boxes,
    parse_paligemma_locations,
    parse_quadrant,
    quadrant_numbering,
)

B = ParsedBox

JSON_ANSWERS = [
    pytest.param(
        '```json\n[\n\t{"bbox_2d": [12, 34, 56, 78], "label": "cat"},\n'
        '\t{"bbox_2d": [100, 20, 180, 90], "label": "dog"}\n]\n```',
        [B((12, 34, 56, 78), "cat"), B((100, 20, 180, 90), "dog")],
        0,
        id="qwen-fenced",
    ),
    pytest.param(
        'Sure! Here are the objects I found:\n[{"bbox_2d": [1, 2, 3, 4], "label": "screw"}]\n'
        "Let me know if you need more.",
        [B((1, 2, 3, 4), "screw")],
        0,
        id="prose-around",
    ),
    pytest.param(
        '```json\n[\n  {"bbox_2d": [10, 10, 50, 50], "label": "a"},\n  {"bbox_2d": [60, 60, 90, 90], "label": "b"},\n'
        '  {"bbox_2d": [5, 7',
        [B((10, 10, 50, 50), "a"), B((60, 60, 90, 90), "b")],
        0,
        id="truncated-mid-box",
    ),
    pytest.param(
        '[{"bbox_2d": [10, 10, 50, 50], "label": "a"}, {"bbox_2d": [60, 60, 90, 90], "label": "hel',
        [B((10, 10, 50, 50), "a")],
        0,
        id="truncated-mid-label",
    ),
    pytest.param(
        "[{'bbox_2d': [5, 6, 7, 8], 'label': 'Raspberry Pi 3 B+'}]",
        [B((5, 6, 7, 8), "Raspberry Pi 3 B+")],
        0,
        id="single-quotes",
    ),
    pytest.param(
        '[{"bbox": [1.5, 2.5, 3.5, 4.5], "name": "bolt"}, {"box": [9, 9, 10, 10], "category": "nut"}]',
        [B((1.5, 2.5, 3.5, 4.5), "bolt"), B((9, 9, 10, 10), "nut")],
        0,
        id="other-keys",
    ),
    pytest.param(
        '[{"bbox_2d": [80, 90, 20, 10], "label": "x"}]',
        [B((20, 10, 80, 90), "x")],
        0,
        id="swapped-corners",
    ),
    pytest.param(
        '[{"bbox_2d": [NaN, 2, 3, 4], "label": "a"}, {"bbox_2d": [None, null, 3, 4], "label": "b"}, '
        '{"bbox_2d": [1, 2, 3], "label": "c"}, {"bbox_2d": [1, 2, 3, 4], "label": "d"}]',
        [B((1, 2, 3, 4), "d")],
        3,
        id="nan-none-short",
    ),
    pytest.param(
        "[[10, 20, 30, 40], [50, 60, 70, 80]]",
        [B((10, 20, 30, 40)), B((50, 60, 70, 80))],
        0,
        id="list-of-lists",
    ),
    pytest.param(
        "The chess piece is located at [123, 45, 200, 160] in the image.",
        [B((123, 45, 200, 160))],
        0,
        id="bare-list-in-prose",
    ),
    pytest.param(
        'Output format: [x1, y1, x2, y2].\n{"bbox_2d": [3, 4, 5, 6], "label": "the driver\'s seat"}',
        [B((3, 4, 5, 6), "the driver's seat")],
        0,
        id="echoed-format-and-apostrophe",
    ),
    pytest.param(
        '{"bbox_2d": [[1, 1, 2, 2], [3, 3, 4, 4]], "label": "pawn"}',
        [B((1, 1, 2, 2), "pawn"), B((3, 3, 4, 4), "pawn")],
        0,
        id="key-with-several-boxes",
    ),
    pytest.param(
        '[{"bbox_2d": ["12", "34", "56", "78"], "label": "quoted \\"numbers\\""}]',
        [B((12, 34, 56, 78), 'quoted "numbers"')],
        0,
        id="string-numbers-escaped-label",
    ),
    pytest.param('{"label": "cat", "bbox_2d": null}', [], 1, id="null-box"),
    pytest.param("I cannot find any such object in the image.", [], 0, id="refusal"),
    pytest.param("[]", [], 0, id="empty-list"),
    pytest.param("", [], 0, id="empty"),
]


@pytest.mark.parametrize(("answer", "boxes", "rejected"), JSON_ANSWERS)
def test_parse_json_boxes(answer: str, boxes: list[ParsedBox], rejected: int) -> None:
    result = parse_json_boxes(answer)
    assert result.boxes == boxes
    assert result.rejected == rejected


FLORENCE_ANSWERS = [
    pytest.param(
        "</s><s>wheels<loc_144><loc_570><loc_870><loc_778>wheels<loc_711><loc_573><loc_866><loc_774></s><pad><pad>",
        [B((144, 570, 870, 778), "wheels"), B((711, 573, 866, 774), "wheels")],
        0,
        id="open-vocabulary",
    ),
    pytest.param(
        "</s><s>red car<loc_53><loc_334><loc_933><loc_775><loc_711><loc_203><loc_906><loc_546>"
        "sky<loc_0><loc_0><loc_999><loc_300></s>",
        [B((53, 334, 933, 775), "red car"), B((711, 203, 906, 546), "red car"), B((0, 0, 999, 300), "sky")],
        0,
        id="phrase-grounding",
    ),
    pytest.param(
        "</s><s>cat<loc_10><loc_20><loc_30><loc_40>dog<loc_50><loc_60></s>",
        [B((10, 20, 30, 40), "cat")],
        1,
        id="truncated-run",
    ),
    pytest.param(
        "</s><s>screw<poly><loc_10><loc_20><loc_30><loc_25><loc_20><loc_40></poly></s>",
        [B((10, 20, 30, 40), "screw")],
        0,
        id="polygon",
    ),
    pytest.param("</s><s>A cat sitting on a mat.</s>", [], 0, id="caption-only"),
]


@pytest.mark.parametrize(("answer", "boxes", "rejected"), FLORENCE_ANSWERS)
def test_parse_florence_locations(answer: str, boxes: list[ParsedBox], rejected: int) -> None:
    result = parse_florence_locations(answer)
    assert result.boxes == boxes
    assert result.rejected == rejected


PALIGEMMA_ANSWERS = [
    pytest.param(
        "<loc0100><loc0200><loc0300><loc0400> cat ; <loc0010><loc0020><loc1023><loc1023> dog",
        [B((200, 100, 400, 300), "cat"), B((20, 10, 1023, 1023), "dog")],
        0,
        id="two-objects-y-first",
    ),
    pytest.param(
        "<loc0500><loc0400><loc0100><loc0200> black pawn",
        [B((200, 100, 400, 500), "black pawn")],
        0,
        id="swapped",
    ),
    pytest.param(
        "<loc0100><loc0200><loc0300> cat ; <loc0010><loc0020><loc0030><loc0040> dog",
        [B((20, 10, 40, 30), "dog")],
        1,
        id="three-tokens",
    ),
    pytest.param("<loc0001><loc0002><loc0003><loc0004>", [B((2, 1, 4, 3), None)], 0, id="no-label"),
    pytest.param("no objects here", [], 0, id="no-tokens"),
]


@pytest.mark.parametrize(("answer", "boxes", "rejected"), PALIGEMMA_ANSWERS)
def test_parse_paligemma_locations(answer: str, boxes: list[ParsedBox], rejected: int) -> None:
    result = parse_paligemma_locations(answer)
    assert result.boxes == boxes
    assert result.rejected == rejected


PLAIN_PROMPT = (
    "Which quadrant of the image is the resistor in? Answer top-left, top-right, bottom-left or bottom-right."
)
NUMBERED_PROMPT = (
    "Which quadrant is the resistor in? Answer with its number: "
    "1: top-left, 2: top-right, 3: bottom-left, 4: bottom-right."
)

QUADRANT_ANSWERS = [
    pytest.param("top-left", PLAIN_PROMPT, "top-left", id="plain"),
    pytest.param("Top-Left", PLAIN_PROMPT, "top-left", id="title-case"),
    pytest.param("top left", PLAIN_PROMPT, "top-left", id="space"),
    pytest.param("Upper left.", PLAIN_PROMPT, "top-left", id="upper"),
    pytest.param("lower_right", PLAIN_PROMPT, "bottom-right", id="lower-underscore"),
    pytest.param("The resistor is in the top-right quadrant of the image.", PLAIN_PROMPT, "top-right", id="sentence"),
    pytest.param("BOTTOM-LEFT", PLAIN_PROMPT, "bottom-left", id="upper-case"),
    pytest.param("left-bottom", PLAIN_PROMPT, "bottom-left", id="reversed"),
    pytest.param("It could be top-left or bottom-right.", PLAIN_PROMPT, None, id="ambiguous"),
    pytest.param("2", PLAIN_PROMPT, None, id="digit-without-numbering"),
    pytest.param("2", NUMBERED_PROMPT, "top-right", id="digit-numbered"),
    pytest.param("Quadrant 4.", NUMBERED_PROMPT, "bottom-right", id="quadrant-digit"),
    pytest.param("3 or 4", NUMBERED_PROMPT, None, id="two-digits"),
    pytest.param("5", NUMBERED_PROMPT, None, id="digit-out-of-range"),
    pytest.param("bottom-left (3)", NUMBERED_PROMPT, "bottom-left", id="word-and-digit"),
    pytest.param("I don't know.", PLAIN_PROMPT, None, id="no-answer"),
    pytest.param("", None, None, id="empty"),
]


@pytest.mark.parametrize(("answer", "prompt", "quadrant"), QUADRANT_ANSWERS)
def test_parse_quadrant(answer: str, prompt: str | None, quadrant: str | None) -> None:
    assert parse_quadrant(answer, prompt) == quadrant


@pytest.mark.parametrize(
    ("prompt", "numbering"),
    [
        pytest.param(
            NUMBERED_PROMPT, {"1": "top-left", "2": "top-right", "3": "bottom-left", "4": "bottom-right"}, id="colon"
        ),
        pytest.param(
            "Reply (1) top left, (2) top right, (3) bottom left or (4) bottom right.",
            {"1": "top-left", "2": "top-right", "3": "bottom-left", "4": "bottom-right"},
            id="parenthesised-before",
        ),
        pytest.param(
            "Reply top-left = 1, top-right = 2, bottom-left = 3, bottom-right = 4.",
            {"1": "top-left", "2": "top-right", "3": "bottom-left", "4": "bottom-right"},
            id="equals-after",
        ),
        pytest.param(PLAIN_PROMPT, {}, id="none"),
        pytest.param("1: top-left, 1: top-right", {}, id="contradictory"),
    ],
)
def test_quadrant_numbering(prompt: str, numbering: dict[str, str]) -> None:
    assert quadrant_numbering(prompt) == numbering
