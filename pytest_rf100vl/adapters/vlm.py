"""What the adapters of models that answer in text share (Florence-2, Qwen-VL, PaliGemma).

Such a model is asked for boxes in words, as the RF100-VL paper ran MLLMs: every box it
writes scores 1.0, its label is mapped back to a class (exactly, then ignoring case and
punctuation; a label that matches no class is dropped and counted), and all class names
go in one prompt unless the adapter option ``per_class=True`` asks one prompt per class
(then every box of a prompt takes that prompt's class, whatever label it carries).

Each model answers in its own coordinate space; an adapter declares it once per answer as
a :class:`Reply` frame (and a bin offset), and :meth:`TextAnswerAdapter.to_pixels` is the
one place where that space becomes pixels of the given image. Generation is greedy (no
sampling, one beam); the checkpoint's other generation settings apply. A tiny random model
(``NAME:tiny``) rarely writes its end token, so it generates :data:`TINY_MAX_NEW_TOKENS`
tokens unless ``max_new_tokens`` is given: a smoke run checks the path, not the answers.

Parse outcomes are counted and reported in :meth:`TextAnswerAdapter.describe`: answers,
boxes read, boxes rejected (unreadable coordinates), boxes whose label matched no class,
UOUO answers without a box or a quadrant word, and the unmatched labels themselves.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image

from rf100vl_hf.progress import progress_bar

from pytest_rf100vl.adapters.base import TINY, DetectionTask, Detections, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.hf import HFDetector, pad_elongated
from pytest_rf100vl.adapters.parsing import BoxParse, ParsedBox, parse_quadrant


TINY_MAX_NEW_TOKENS = 16
"""What a tiny random model generates per answer by default (a real checkpoint: the adapter's ``max_new_tokens``)."""


@dataclass(frozen=True)
class Reply:
    """A model's answer to one prompt about one image, and the ``(width, height)`` of the
    coordinate space its numbers are in (pixels of a resized input, 1000 bins...)."""

    text: str
    frame: tuple[float, float]


def label_key(name: str) -> str:
    """A label as compared when the exact spelling fails: case-folded, letters and digits only."""
    return "".join(char for char in name.casefold() if char.isalnum())


class LabelMap:
    """Model label -> class index: exact, then by :func:`label_key`. Two classes that share a
    key (``B+`` and ``B-``) are then matched only exactly. Misses are counted per label."""

    def __init__(self, classes: list[str]):
        self.exact = {name: index for index, name in enumerate(classes)}
        keys = Counter(label_key(name) for name in classes)
        self.loose = {label_key(name): index for index, name in enumerate(classes) if keys[label_key(name)] == 1}
        self.unknown: Counter[str] = Counter()

    def index(self, label: str | None) -> int | None:
        if label is not None:
            found = self.exact.get(label.strip(), self.loose.get(label_key(label)))
            if found is not None:
                return found
        self.unknown[label or ""] += 1
        return None


class TextAnswerAdapter(HFDetector):
    """A model that writes its boxes as text. Subclasses say how to ask
    (:meth:`detection_prompt`, :meth:`box_prompt`, :meth:`quadrant_prompt`), how to run the
    model (:meth:`generate`) and how to read its answer (:meth:`parse`)."""

    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False, "max_new_tokens": 1024}
    coordinate_offset: ClassVar[float] = 0.0
    """Added to every value before scaling: 0.5 reads a bin index as the bin's centre."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        if self.checkpoint == TINY and "max_new_tokens" not in options:
            self.options["max_new_tokens"] = TINY_MAX_NEW_TOKENS
        self.per_class = bool(self.options["per_class"])
        self.max_new_tokens = int(self.options["max_new_tokens"])
        self.stats: Counter[str] = Counter()  # answers, boxes, rejected_boxes, unmatched_boxes, no_box, no_quadrant
        self.labels = LabelMap([])
        self._prompts: list[tuple[str, int | None]] = []

    # ------------------------------------------------------------------ model-specific

    @abstractmethod
    def detection_prompt(self, names: list[str], instructions: dict[str, str]) -> str:
        """The prompt asking for every object of these classes (with their instructions, if any)."""

    @abstractmethod
    def box_prompt(self, query: GroundingQuery) -> str:
        """The UOUO box question in this model's framing."""

    @abstractmethod
    def quadrant_prompt(self, query: GroundingQuery) -> str | None:
        """The UOUO quadrant question in this model's framing; ``None`` for a model that
        cannot answer questions (the scorer then reads the quadrant from the box centre)."""

    @abstractmethod
    def generate(self, images: list[Image.Image], prompts: list[str]) -> list[Reply]:
        """One greedy answer per (image, prompt) pair, batched."""

    @abstractmethod
    def parse(self, text: str) -> BoxParse:
        """The boxes of an answer, in the model's coordinate space."""

    # ------------------------------------------------------------------ shared

    def describe(self) -> dict[str, Any]:
        """What ran, plus how well its answers could be read so far."""
        return {
            **super().describe(),
            "per_class": self.per_class,
            "max_new_tokens": self.max_new_tokens,
            "answers": dict(self.stats),
            "unknown_labels": dict(self.labels.unknown),
        }

    def answer_counts(self) -> dict[str, int]:
        counts = dict(self.stats)
        counts["unknown_labels"] = counts.get("unknown_labels", 0) + sum(self.labels.unknown.values())
        return counts

    def set_task(self, task: DetectionTask) -> None:
        """Build the prompts once per dataset: one with every class, or one per class."""
        super().set_task(task)
        self.stats["unknown_labels"] += sum(self.labels.unknown.values())  # kept past the dataset
        self.labels = LabelMap(task.classes)
        instructions = task.instructions if task.prompt == "instructions" else {}
        if self.per_class:
            self._prompts = [
                (self.detection_prompt([name], _only(instructions, [name])), index)
                for index, name in enumerate(task.classes)
            ]
        else:
            self._prompts = [(self.detection_prompt(task.classes, _only(instructions, task.classes)), None)]

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        if query is not None:
            return (self.box_prompt(query), self.quadrant_prompt(query) or "")
        return tuple(prompt for prompt, _ in self._prompts)

    def to_pixels(self, box: tuple[float, float, float, float], reply: Reply, image: Image.Image) -> tuple[float, ...]:
        """A box in the reply's coordinate space as ``xyxy`` pixels of ``image``, clipped to it."""
        scale_x, scale_y = image.width / reply.frame[0], image.height / reply.frame[1]
        x1, y1, x2, y2 = (value + self.coordinate_offset for value in box)
        return (
            float(np.clip(x1 * scale_x, 0, image.width)),
            float(np.clip(y1 * scale_y, 0, image.height)),
            float(np.clip(x2 * scale_x, 0, image.width)),
            float(np.clip(y2 * scale_y, 0, image.height)),
        )

    def read(self, reply: Reply) -> list[ParsedBox]:
        """The boxes of a reply, counted into :attr:`stats`."""
        parsed = self.parse(reply.text)
        self.stats["answers"] += 1
        self.stats["boxes"] += len(parsed.boxes)
        self.stats["rejected_boxes"] += parsed.rejected
        return parsed.boxes

    def detect(self, images: list[Image.Image]) -> list[Detections]:
        assert self.task is not None  # predict checked it
        found: list[tuple[list[tuple[float, ...]], list[int]]] = [([], []) for _ in images]
        prompts = progress_bar(self._prompts, desc=f"{self.name} classes", disable=len(self._prompts) < 2, leave=False)
        for prompt, class_index in prompts:
            for (boxes, labels), image, reply in zip(found, images, self.generate(images, [prompt] * len(images))):
                for parsed in self.read(reply):
                    index = class_index if class_index is not None else self.labels.index(parsed.label)
                    if index is None:
                        self._warn_unknown(parsed.label)
                        self.stats["unmatched_boxes"] += 1
                        continue
                    boxes.append(self.to_pixels(parsed.box, reply, image))
                    labels.append(index)
        return [
            Detections(
                np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
                np.ones(len(labels)),
                np.asarray(labels, dtype=np.int64),
            )
            for boxes, labels in found
        ]

    def _warn_unknown(self, label: str | None) -> None:
        if self.labels.unknown[label or ""] == 1:
            assert self.task is not None
            what = f"label {label!r}" if label else "a box without a label"
            warnings.warn(
                f"{self.name}: {what} is not a class of {self.task.dataset!r}; such boxes are dropped "
                "(counted in describe()['unknown_labels'])",
                stacklevel=4,  # the caller of predict
            )

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """Ask both UOUO questions of each mosaic; the box is the first one labelled with the
        target (else the first one), the quadrant the word the second answer names."""
        if len(batch) != len(queries):
            raise ValueError(f"{len(batch)} images but {len(queries)} queries")
        if not batch:
            return []
        images = [pad_elongated(item.image) for item in batch]
        quadrant_prompts = [self.quadrant_prompt(query) for query in queries]
        asked = [i for i, prompt in enumerate(quadrant_prompts) if prompt is not None]
        with torch.inference_mode():
            box_replies = self.generate(images, [self.box_prompt(query) for query in queries])
            quadrant_replies = (
                dict(zip(asked, self.generate([images[i] for i in asked], [quadrant_prompts[i] for i in asked])))
                if asked
                else {}
            )
        answers = []
        for i, (image, query, box_reply) in enumerate(zip(images, queries, box_replies)):
            boxes = self.read(box_reply)
            target = label_key(query.target)
            best = next((box for box in boxes if label_key(box.label or "") == target), boxes[0] if boxes else None)
            self.stats["no_box"] += int(best is None)
            raw = {"box": box_reply.text}
            quadrant = None
            if i in quadrant_replies:
                raw["quadrant"] = quadrant_replies[i].text
                quadrant = parse_quadrant(raw["quadrant"], query.quadrant_prompt)
                self.stats["no_quadrant"] += int(quadrant is None)
            answers.append(GroundingAnswer(self.to_pixels(best.box, box_reply, image) if best else None, quadrant, raw))
        return answers

    def run_generate(self, inputs: dict[str, Any]) -> torch.Tensor:
        """Greedy generation on processor outputs (torch or numpy arrays, moved to the model's
        device and dtype; anything else the processor returned is not a model input)."""
        tensors = {
            key: self.to_model(torch.as_tensor(value))
            for key, value in inputs.items()
            if isinstance(value, (torch.Tensor, np.ndarray))
        }
        return self.model.generate(**tensors, do_sample=False, num_beams=1, max_new_tokens=self.max_new_tokens)


def _only(instructions: dict[str, str], names: list[str]) -> dict[str, str]:
    return {name: instructions[name] for name in names if instructions.get(name)}


def instructions_block(instructions: dict[str, str]) -> str:
    """Annotator instructions appended to a prompt, one paragraph per class; empty when none."""
    if not instructions:
        return ""
    lines = [f"- {name}: {text}" for name, text in instructions.items()]
    return "\n\nThe annotators labelled these objects following these instructions:\n" + "\n".join(lines)
