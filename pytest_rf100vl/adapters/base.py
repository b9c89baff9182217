"""The one contract every model meets (DESIGN.md section 3).

An adapter is built from a spec ``NAME[:CHECKPOINT_OR_PATH]``, told the task once per
dataset (:meth:`Adapter.set_task`), then called on batches of RGB images. It returns
boxes in pixels of the image it was given, as ``xyxy``; the runner converts, clips and
caps them in one place (:func:`rf100vl_hf.boxes.sanitize_detections`), so adapters stay
thin and cannot differ in how they treat bad output.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from PIL import Image

PROMPT_MODES = ("names", "instructions", "fewshot")


@dataclass(frozen=True)
class FewShotExample:
    """One annotated image of the ``fewshot_10`` split, for image-conditioned prompting."""

    image: Image.Image  # RGB
    boxes: np.ndarray  # (N, 4) xyxy pixels
    labels: np.ndarray  # (N,) class indices


@dataclass(frozen=True)
class DetectionTask:
    """What a detector is told once per dataset. Category 0 never reaches here."""

    dataset: str
    classes: list[str]
    prompt: str = "names"  # one of PROMPT_MODES
    instructions: dict[str, str] = field(default_factory=dict)  # class -> description + instructions
    fewshot: tuple[FewShotExample, ...] = ()


@dataclass
class Detections:
    """Per-image output: ``xyxy`` pixel boxes, scores and class indices into ``task.classes``."""

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray

    @classmethod
    def empty(cls) -> "Detections":
        return cls(np.zeros((0, 4)), np.zeros((0,)), np.zeros((0,), dtype=np.int64))


@dataclass(frozen=True)
class GroundingQuery:
    """A UOUO question about one mosaic: where is ``target``, and in which quadrant."""

    target: str
    box_prompt: str
    quadrant_prompt: str


@dataclass
class GroundingAnswer:
    """A model's answer: a box in pixels and/or a quadrant word; ``None`` where it gave none
    that could be parsed. ``raw`` keeps the text of models that answer in text."""

    box: tuple[float, float, float, float] | None
    quadrant: str | None
    raw: dict[str, str] = field(default_factory=dict)


class Adapter(ABC):
    """Base class of all adapters. Subclasses set ``name`` and ``default_checkpoint``."""

    name: ClassVar[str]
    default_checkpoint: ClassVar[str | None] = None
    prompt_modes: ClassVar[tuple[str, ...]] = ("names",)

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        self.checkpoint = checkpoint or self.default_checkpoint
        self.device = device
        self.dtype = dtype
        self.options = options
        self.task: DetectionTask | None = None

    @property
    def revision(self) -> str | None:
        """The model's commit or content hash, when known (recorded with every result)."""
        return None

    @property
    def is_smoke(self) -> bool:
        """True for models whose scores mean nothing (random weights): results say so."""
        return False

    def set_task(self, task: DetectionTask) -> None:
        """Told once per dataset, before any batch. Adapters precompute prompts here."""
        if task.prompt not in self.prompt_modes:
            raise ValueError(
                f"adapter {self.name!r} does not support prompt mode {task.prompt!r} "
                f"(supported: {', '.join(self.prompt_modes)})"
            )
        self.task = task

    @abstractmethod
    def predict(self, images: list[Image.Image]) -> list[Detections]:
        """Detections for each RGB image of the batch, in order."""

    def ground(self, images: list[Image.Image], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """UOUO grounding. Detectors answer with their best box for the target's name; the
        quadrant is then read from the box centre by the scorer."""
        answers = []
        for image, query in zip(images, queries):
            self.set_task(DetectionTask(dataset="uouo", classes=[query.target]))
            (detections,) = self.predict([image])
            if len(detections.scores) == 0:
                answers.append(GroundingAnswer(None, None))
                continue
            best = int(np.argmax(detections.scores))
            answers.append(GroundingAnswer(tuple(float(v) for v in detections.boxes[best]), None))
        return answers

    def describe(self) -> dict[str, Any]:
        """What ran: recorded in results and benchmark ``extra_info``."""
        return {
            "model": self.name,
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "device": self.device,
            "dtype": self.dtype,
            "smoke": self.is_smoke,
        }

    def close(self) -> None:
        """Release memory; called once when the session ends."""
