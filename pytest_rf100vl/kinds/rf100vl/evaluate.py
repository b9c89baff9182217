"""One RF100-VL (model, dataset) pair end to end: tell the adapter its task, run it over the
split (under pytest-benchmark's clock when there is one), and score the predictions as the
scoring protocol says (:mod:`rf100vl_hf.protocols`)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rf100vl_hf.boxes import Sanitized, xyxy_to_xywh
from rf100vl_hf.protocols import PAPER, PROTOCOLS, Protocol

from pytest_rf100vl.adapters.base import Adapter
from pytest_rf100vl.engine.guard import adapter_call
from pytest_rf100vl.engine.runner import InferenceResult, LoopOptions, run_inference, run_rounds
from pytest_rf100vl.kinds.rf100vl.tasks import detection_task

if TYPE_CHECKING:
    import datasets

    from rf100vl_hf.metrics import CocoScores


@dataclass
class Evaluation:
    """A pair's scores, its inference record and its predictions in COCO results format."""

    scores: "CocoScores"
    inference: InferenceResult
    predictions: list[dict[str, Any]]


def coco_predictions(detections: dict[int, Sanitized], category_ids: list[int]) -> list[dict[str, Any]]:
    """COCO result records with the export's own image and category ids, so a file of them
    can be scored (or replayed) against the original export."""
    records = []
    for image_id, safe in detections.items():
        for box, score, label in zip(xyxy_to_xywh(safe.boxes).tolist(), safe.scores.tolist(), safe.labels.tolist()):
            records.append({"image_id": image_id, "category_id": category_ids[label], "bbox": box, "score": score})
    return records


def run_pair(
    adapter: Adapter,
    dataset: "datasets.Dataset",
    metadata: dict[str, Any],
    split: str,
    prompt: str,
    batch_size: int,
    load_split: Callable[[str], "datasets.Dataset"],
    benchmark: Any = None,
    loop: LoopOptions = LoopOptions(),
    protocol: Protocol = PROTOCOLS[PAPER],
    trained: bool = False,
) -> Evaluation:
    """Inference over ``dataset`` then COCO AP at ``protocol``'s maxDets; with ``benchmark``
    (pytest-benchmark's fixture) the inference runs once under its clock, and its
    ``extra_info`` gets the throughput. A ``protocol`` that prompts category 0 does so for a
    model that was not fine-tuned (``trained``): its boxes go to category 0, in the ground truth
    without a box, as pycocotools scores Roboflow's scripts' own files."""
    from rf100vl_hf.metrics import coco_ground_truth, evaluate

    task = detection_task(adapter, dataset, metadata, split, prompt, load_split,
                          protocol.category_zero and not trained)
    with adapter_call("the adapter's set_task"):
        adapter.set_task(task)
    label = f"{adapter.name} on {metadata['name']}"

    inference, rounds = run_rounds(
        lambda options, round_label: run_inference(adapter, dataset, batch_size, progress=False,
                                                   description=label + round_label, loop=options),
        loop, benchmark, adapter.repeatable,
    )
    inference.rounds = rounds
    predictions = coco_predictions(inference.detections, list(task.category_ids))
    truth = coco_ground_truth(dataset, list(metadata["category_ids"]))
    for cid, name in zip(task.category_ids, task.classes):  # category 0, when prompted: no box of its own
        if cid not in metadata["category_ids"]:
            unique = f"{name} (category {cid})" if name in metadata["classes"] else name
            truth["categories"].insert(0, {"id": cid, "name": unique})
    scores = evaluate(truth, predictions, max_dets=protocol.max_dets)
    return Evaluation(scores, inference, predictions)
