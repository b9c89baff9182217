"""One UOUO (model, dataset) pair end to end: ask each mosaic the two questions its row
stores (under pytest-benchmark's clock when there is one), and score the answers with
quadrant accuracy, mIoU and acc50 (:func:`rf100vl_hf.metrics.grounding.score_grounding`).

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rf100vl_hf.metrics.grounding import GroundingScores, GroundingTarget, score_grounding

from pytest_rf100vl.adapters.base import Adapter, GroundingAnswer
from pytest_rf100vl.engine.guard import adapter_call
from pytest_rf100vl.engine.runner import GroundingResult, LoopOptions, run_grounding, run_rounds
from pytest_rf100vl.kinds.uouo.tasks import grounding_queries, grounding_task

if TYPE_CHECKING:
    import datasets

UNREAD_QUADRANT = ""
"""The quadrant the scorer is given for a reply it could not read: a word that is no quadrant,
so it counts as a parse failure (``None`` would mean "not asked": read from the box centre)."""


@dataclass
class GroundingEvaluation:
    """A UOUO pair's scores, its inference record, and one record per mosaic for the answers file."""

    scores: GroundingScores
    inference: GroundingResult
    records: list[dict[str, Any]]


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
    mosaic_ids: list[int], targets: list[GroundingTarget], targets_named: list[str], inference: GroundingResult
) -> list[dict[str, Any]]:
    """One line of the answers file per mosaic: the question's target and its truth, what the
    model answered (box, quadrant word, raw text), how it scored, and the error if it raised."""
    records = []
    for mosaic_id, target, name, answer in zip(mosaic_ids, targets, targets_named, inference.answers, strict=True):
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
                "error": inference.errors.get(mosaic_id),
            }
        )
    return records


def run_grounding_pair(
    adapter: Adapter,
    dataset: "datasets.Dataset",
    name: str,
    canvas: int,
    batch_size: int,
    benchmark: Any = None,
    loop: LoopOptions = LoopOptions(),
) -> GroundingEvaluation:
    """Ask every mosaic of ``dataset`` (the UOUO dataset ``name``, mosaics ``canvas`` pixels
    square) its questions, then score; an adapter that needs the ground truth gets it first."""
    task = grounding_task(adapter, dataset, name)
    if task is not None:
        with adapter_call("the adapter's set_task"):
            adapter.set_task(task)
    queries = grounding_queries(dataset)
    label = f"{adapter.name} on {name}"
    inference, rounds = run_rounds(
        lambda options, round_label: run_grounding(adapter, dataset, queries, batch_size, progress=False,
                                                   description=label + round_label, loop=options),
        loop, benchmark, adapter.repeatable,
    )
    inference.rounds = rounds
    targets = grounding_targets(dataset, canvas)
    scores = score_grounding([scored_answer(answer) for answer in inference.answers], targets)
    mosaic_ids = [int(i) for i in dataset["mosaic_id"]]
    records = answer_records(mosaic_ids, targets, [query.target for query in queries], inference)
    return GroundingEvaluation(scores, inference, records)
