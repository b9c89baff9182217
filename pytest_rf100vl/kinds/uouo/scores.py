"""A UOUO pair's score: each mosaic was asked the two questions its row stores, and the
answers are scored with quadrant accuracy, mIoU and acc50
(:func:`rf100vl_hf.metrics.grounding.score_grounding`).

The question is built from the row (``target_category``, ``box_prompt``,
``quadrant_prompt``) and scored against ``target_box`` and ``target_quadrant``. Which
quadrant an answer gives:

- a quadrant word the model gave is scored as given;
- a model that was asked the quadrant question (its answer keeps the reply in
  ``raw["quadrant"]``) but whose reply could not be read has a quadrant parse failure: its
  box centre does not stand in, which would hide the failure;
- a model that was not asked (detectors, Florence-2) answers through its box centre.

A mosaic the adapter raised on has no answer: it scores as a failure, is counted, and the
run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rf100vl_hf.metrics.grounding import GroundingTarget, score_grounding
from rf100vl_hf.results.schema import GroundingErrors, GroundingScores

from pytest_rf100vl.adapters.base import GroundingAnswer
from pytest_rf100vl.engine.guard import first_error_line
from pytest_rf100vl.engine.runner import Answers
from pytest_rf100vl.kinds.base import Scored, Split

if TYPE_CHECKING:
    import datasets

UNREAD_QUADRANT = ""
"""The quadrant the scorer is given for a reply it could not read: a word that is no quadrant,
so it counts as a parse failure (``None`` would mean "not asked": read from the box centre)."""


def scored_answer(answer: GroundingAnswer) -> GroundingAnswer:
    """The answer as the scorer must see it (see the module docstring)."""
    if answer.quadrant is None and "quadrant" in answer.raw:
        return GroundingAnswer(answer.box, UNREAD_QUADRANT, answer.raw)
    return answer


def grounding_targets(dataset: "datasets.Dataset", canvas: int) -> list[GroundingTarget]:
    """Each mosaic's target box (``xyxy`` pixels) and quadrant, in row order."""
    return [
        GroundingTarget(tuple(box), quadrant, canvas, canvas)
        for box, quadrant in zip(dataset["target_box"], dataset["target_quadrant"])
    ]


def _plain(box: Any) -> list[float] | str | None:
    """A box as JSON can hold it: numbers, or the text of whatever the adapter put there."""
    if box is None:
        return None
    try:
        return [float(v) for v in box]
    except (TypeError, ValueError):
        return repr(box)


def answer_records(
    mosaic_ids: list[int], targets: list[GroundingTarget], targets_named: list[str], answers: Answers
) -> list[dict[str, Any]]:
    """One line of the answers file per mosaic: the question's target and its truth, what the
    model answered (box, quadrant word, raw text), how it scored, and the error if it raised."""
    records = []
    for mosaic_id, target, name, answer in zip(mosaic_ids, targets, targets_named, answers.grounding, strict=True):
        alone = score_grounding([scored_answer(answer)], [target])
        records.append(
            {
                "mosaic_id": mosaic_id,
                "target": name,
                "target_box": list(target.box),
                "target_quadrant": target.quadrant,
                "box": _plain(answer.box),
                "quadrant": answer.quadrant,
                "raw": answer.raw,
                "iou": alone.miou,
                "correct": bool(alone.quadrant_accuracy),
                "parse_failure": bool(alone.parse_failures),
                "error": answers.errors.get(mosaic_id),
            }
        )
    return records


def grounding_scores(answers: Answers, split: Split) -> Scored:
    """Quadrant accuracy, mIoU and acc50 of the pair's answers, one record per mosaic for the
    answers file; unscored when the model failed on every mosaic."""
    n = len(split.images)
    targets = grounding_targets(split.images, split.metadata["canvas"])
    scores = score_grounding([scored_answer(answer) for answer in answers.grounding], targets)
    mosaic_ids = [int(i) for i in split.images["mosaic_id"]]
    records = answer_records(mosaic_ids, targets, [query.target for query in split.questions or ()], answers)
    columns = GroundingScores(accuracy=scores.quadrant_accuracy, miou=scores.miou, acc50=scores.acc50,
                              parse_failures=scores.parse_failures, box_parse_failures=scores.box_parse_failures,
                              quadrant_parse_failures=scores.quadrant_parse_failures)
    unscored = None
    if n and answers.counts.failed_images >= n:
        first = f"; first error: {first_error_line(answers.counts.first_error)}" if answers.counts.first_error else ""
        unscored = f"the model failed on every one of the {n} mosaics{first}"
    errors = GroundingErrors(
        quadrant_confusion=[{"truth": truth, "answer": answer, "count": count}
                            for (truth, answer), count in sorted(scores.quadrant_confusion.items())],
        iou_histogram=list(scores.iou_histogram), iou_median=scores.iou_median,
    )
    return Scored({"accuracy": scores.quadrant_accuracy, "miou": scores.miou}, columns, records, "jsonl", unscored,
                  scores, errors)
