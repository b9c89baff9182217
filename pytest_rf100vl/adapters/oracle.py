"""The oracle: answers with the ground truth at score 1, so its AP is exactly 100 and any
other figure exposes a bug in the path between the dataset and the metric (id mapping,
box conventions, clipping, the metric's own settings)."""

from __future__ import annotations

import numpy as np

from pytest_rf100vl.adapters.base import PROMPT_MODES, Adapter, Detections, DetectionTask, ImageItem


class OracleAdapter(Adapter):
    """Ground truth as detections; needs no checkpoint. The runner fills
    ``task.ground_truth`` because the class declares ``needs_ground_truth``; an image
    missing from it has no boxes."""

    name = "oracle"
    prompt_modes = PROMPT_MODES
    needs_ground_truth = True

    def set_task(self, task: DetectionTask) -> None:
        if task.ground_truth is None:
            raise ValueError(f"the oracle needs the ground truth of {task.dataset!r}, but task.ground_truth is None")
        super().set_task(task)

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        if self.task is None:
            raise RuntimeError("oracle: set_task must be called before predict")
        out = []
        for item in batch:
            truth = self.task.ground_truth.get(item.image_id, Detections.empty())
            labels = np.asarray(truth.labels, dtype=np.int64)
            out.append(
                Detections(np.array(truth.boxes, dtype=np.float64).reshape(-1, 4), np.ones(len(labels)), labels.copy())
            )
        return out
