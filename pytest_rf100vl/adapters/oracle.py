"""The oracle: answers with the ground truth at score 1, so its AP is exactly 100, and its
UOUO quadrant accuracy and mIoU exactly 1.0; any other figure exposes a bug in the path
between the dataset and the metric (id mapping, box conventions, clipping, the metric's
own settings, the question asked about a mosaic)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pytest_rf100vl.adapters.base import Adapter, Detections, DetectionTask, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.registry import listed


class OracleAdapter(Adapter):
    """Ground truth as detections; needs no checkpoint and takes no option. The runner fills
    ``task.ground_truth`` because the class declares ``needs_ground_truth``; an image
    missing from it has no boxes."""

    name = "oracle"
    default_checkpoint, prompt_modes, tasks = listed(name)
    needs_ground_truth = True
    repeatable = False  # its answers are the labels: a timing round would time nothing
    option_defaults: ClassVar[dict[str, Any]] = {}

    def set_task(self, task: DetectionTask) -> None:
        if task.ground_truth is None:
            raise ValueError(f"the oracle needs the ground truth of {task.dataset!r}, but task.ground_truth is None")
        super().set_task(task)

    def _truth(self, image_id: int) -> Detections:
        if self.task is None:
            raise RuntimeError("oracle: set_task must be called before predict or ground")
        return self.task.ground_truth.get(image_id, Detections.empty())

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        out = []
        for item in batch:
            truth = self._truth(item.image_id)
            labels = np.asarray(truth.labels, dtype=np.int64)
            out.append(
                Detections(np.array(truth.boxes, dtype=np.float64).reshape(-1, 4), np.ones(len(labels)), labels.copy())
            )
        return out

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """The box of the mosaic's object whose class is the query's target (the task holds
        every object of each mosaic, so the target is found by name, as a model must); no
        quadrant word, so the scorer reads the quadrant from the box centre. A target that
        is not in the mosaic gets no answer."""
        answers = []
        for item, query in zip(batch, queries, strict=True):
            truth = self._truth(item.image_id)
            assert self.task is not None  # _truth checked it
            found = [i for i, label in enumerate(truth.labels) if self.task.classes[label] == query.target]
            box = tuple(float(v) for v in truth.boxes[found[0]]) if len(found) == 1 else None
            answers.append(GroundingAnswer(box, None))
        return answers
