"""The samples log (the report key ``log-samples``): one JSON line per image of a pair whose model
answers in text, written beside its predictions as ``<split>.samples.jsonl``.

A line holds the image's id and file, whether the answer came from the answer cache, the
model's transcript (:attr:`~pytest_rf100vl.adapters.base.Detections.transcript`: each
question's texts sent, raw reply, the boxes read from it in the reply's numbers and in pixels,
each box's class or why it was dropped, and how many box-like entries could not be read), and
then what the runner made of the answer:

- detection: the detections as scored (``xyxy`` pixels, class, score, after
  :func:`rf100vl_hf.boxes.sanitize_detections`) and the image's ``repairs`` (boxes ``dropped``
  as non-finite or of a label that is no class index, ``clipped`` to the image, ``swapped``
  corners, ``truncated`` past 500 per class);
- grounding: the target, the box and quadrant word scored;
- ``error``: why the model failed on the image (it then has no answer and no transcript).

An answer from the cache keeps the transcript it was stored with; one stored before
transcripts were kept has ``"transcript": null`` and the rest of its line. The text of a line
passes the session's scrubber when the file is written (:mod:`rf100vl_hf.results.folder`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_rf100vl.adapters.base import Detections, GroundingAnswer, GroundingQuery, ImageItem

if TYPE_CHECKING:
    from rf100vl_hf.boxes import Sanitized


def detection_sample(item: ImageItem, answer: Detections | None, safe: "Sanitized", repairs: dict[str, int],
                     classes: Sequence[str], from_cache: bool, error: str | None = None) -> dict[str, Any]:
    """The line of one image of a detection pair (``answer`` ``None``: the model failed on it;
    ``repairs``: what making its output safe to score took, by kind of repair)."""
    return {
        "image_id": item.image_id,
        "file_name": item.file_name,
        "from_cache": from_cache,
        "transcript": None if answer is None else answer.transcript,
        "detections": [{"box": box, "class": classes[label], "score": score} for box, score, label in
                       zip(safe.boxes.tolist(), safe.scores.tolist(), safe.labels.tolist())],
        "repairs": repairs,
        "error": error,
    }


def grounding_sample(item: ImageItem, query: GroundingQuery, answer: GroundingAnswer, from_cache: bool,
                     error: str | None = None) -> dict[str, Any]:
    """The line of one mosaic of a grounding pair."""
    box = None if answer.box is None else [float(value) for value in answer.box]
    return {
        "mosaic_id": item.image_id,
        "file_name": item.file_name,
        "target": query.target,
        "from_cache": from_cache,
        "transcript": answer.transcript,
        "box": box,
        "quadrant": answer.quadrant,
        "error": error,
    }
