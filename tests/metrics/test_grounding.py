"""UOUO grounding scores on a hand-made table, parse failures included."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rf100vl_hf.metrics import GroundingTarget, quadrant_of, score_grounding


@dataclass
class Answer:
    box: tuple[float, float, float, float] | None
    quadrant: str | None


@pytest.mark.parametrize(
    ("box", "quadrant"),
    [
        ((10, 10, 100, 100), "top-left"),
        ((500, 10, 700, 300), "top-right"),
        ((10, 500, 300, 700), "bottom-left"),
        ((450, 450, 790, 790), "bottom-right"),
        ((300, 300, 500, 500), "bottom-right"),  # centre exactly on both midlines
        ((0, 300, 100, 499), "top-left"),  # centre 399.5: still the top half
    ],
)
def test_quadrant_of_reads_the_box_centre(box, quadrant):
    assert quadrant_of(box, 800, 800) == quadrant


def test_quadrant_of_uses_the_canvas_size():
    assert quadrant_of((500, 10, 600, 100), 1200, 800) == "top-left"
    with pytest.raises(ValueError, match="canvas size must be positive"):
        quadrant_of((0, 0, 1, 1), 0, 800)


def test_scores_a_hand_made_table():
    target = GroundingTarget(box=(100.0, 100.0, 300.0, 300.0), quadrant="top-left", width=800, height=800)
    table = [
        # (answer, IoU with the target, quadrant right?)
        (Answer((100, 100, 300, 300), "top-left"), 1.0, True),
        (Answer((200, 100, 400, 300), None), 1 / 3, True),  # box only: centre (300, 200) is top-left
        (Answer((100, 100, 300, 300), "bottom-right"), 1.0, False),  # the word given is scored, not the box
        (Answer(None, "Top Left"), 0.0, True),  # no box: a box parse failure
        (Answer(None, None), 0.0, False),  # nothing: both fail
        (Answer((100, 100, 300, 300), "upper left"), 1.0, False),  # unreadable word: a quadrant failure
        (Answer((float("nan"), 0, 1, 1), "top_left"), 0.0, True),  # non-finite box: a box failure
        (Answer((0, 0, 50), None), 0.0, False),  # three numbers: both fail
    ]
    scores = score_grounding([answer for answer, _, _ in table], [target] * len(table))
    assert scores.n == 8
    assert scores.miou == pytest.approx((1 + 1 / 3 + 1 + 1) / 8)
    assert scores.acc50 == 3 / 8
    assert scores.quadrant_accuracy == 4 / 8
    assert scores.box_parse_failures == 4
    assert scores.quadrant_parse_failures == 3
    assert scores.parse_failures == 5
    assert scores.parse_failure_rate == 5 / 8
    assert scores.quadrant_confusion == {("top-left", "top-left"): 4, ("top-left", "bottom-right"): 1,
                                         ("top-left", "no answer"): 3}
    assert scores.iou_histogram == (4, 0, 0, 1, 0, 0, 0, 0, 0, 3)  # four 0s, one 1/3, three 1s (the last bin)
    assert scores.iou_median == pytest.approx(1 / 6)


def test_refuses_mismatched_or_bad_targets():
    target = GroundingTarget(box=(0.0, 0.0, 1.0, 1.0), quadrant="top-left", width=800, height=800)
    with pytest.raises(ValueError, match="2 answers for 1 targets"):
        score_grounding([Answer(None, None)] * 2, [target])
    with pytest.raises(ValueError, match="no answers to score"):
        score_grounding([], [])
    bad = GroundingTarget(box=(0.0, 0.0, 1.0, 1.0), quadrant="middle", width=800, height=800)
    with pytest.raises(ValueError, match="target 0: quadrant 'middle' is not one of"):
        score_grounding([Answer(None, None)], [bad])
