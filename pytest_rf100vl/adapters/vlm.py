"""The transformers adapters of models that answer in text (Florence-2, Qwen-VL, PaliGemma,
LLaVA): :class:`~pytest_rf100vl.adapters.text_answers.TextAnswerBase` (prompts, labels,
answer statistics, the detection loop, UOUO) on an
:class:`~pytest_rf100vl.adapters.hf.HFDetector` (loading, devices, tiny models).

Each model answers in its own coordinate space; an adapter declares it once per answer as
a :class:`Reply` frame (and a bin offset), and :meth:`TextAnswerAdapter.to_pixels` is the
one place where that space becomes pixels of the given image. Generation is greedy (no
sampling, one beam); the checkpoint's other generation settings apply. A tiny random model
(``NAME:tiny``) rarely writes its end token, so it generates :data:`TINY_MAX_NEW_TOKENS`
tokens unless ``max_new_tokens`` is given: a smoke run checks the path, not the answers.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image

from pytest_rf100vl.adapters.base import TINY, DetectionTask, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.hf import HFDetector, pad_elongated
from pytest_rf100vl.adapters.parsing import BoxParse, parse_json_boxes
from pytest_rf100vl.adapters.text_answers import Reply, TextAnswerBase, only_instructions

TINY_TEXT: dict[str, int] = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=2048,
)
"""The language model of every tiny text-answering model: two 32-wide layers (token ids apart)."""

TINY_MAX_NEW_TOKENS = 16
"""What a tiny random model generates per answer by default (a real checkpoint: the adapter's ``max_new_tokens``)."""


class TextAnswerAdapter(TextAnswerBase[Image.Image, Any], HFDetector):
    """A transformers model that writes its boxes as text. Subclasses say how to ask
    (:meth:`detection_prompt`, :meth:`box_prompt`, :meth:`quadrant_prompt`), how to run the
    model (:meth:`generate`, on images already padded if elongated) and how to read its
    answer (:meth:`parse`)."""

    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False, "max_new_tokens": 1024}
    coordinate_offset: ClassVar[float] = 0.0
    """Added to every value before scaling: 0.5 reads a bin index as the bin's centre."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        if self.checkpoint == TINY and "max_new_tokens" not in options:
            self.options["max_new_tokens"] = TINY_MAX_NEW_TOKENS
        self.max_new_tokens = int(self.options["max_new_tokens"])

    @abstractmethod
    def detection_prompt(self, names: list[str], instructions: dict[str, str]) -> str:
        """The prompt asking for every object of these classes (with their instructions, if any)."""

    def task_prompts(self, task: DetectionTask) -> list[tuple[Any, int | None]]:
        """One prompt with every class, or one per class; instructions in ``instructions`` mode."""
        instructions = task.instructions if task.prompt == "instructions" else {}
        if self.per_class:
            return [
                (self.detection_prompt([name], only_instructions(instructions, [name])), index)
                for index, name in enumerate(task.classes)
            ]
        return [(self.detection_prompt(task.classes, only_instructions(instructions, task.classes)), None)]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "max_new_tokens": self.max_new_tokens}

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

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """Both UOUO questions per mosaic, on the images padded as for detection."""
        if len(batch) != len(queries):
            raise ValueError(f"{len(batch)} images but {len(queries)} queries")
        with torch.inference_mode():
            return self.answer_grounding([pad_elongated(item.image) for item in batch], queries)

    def run_generate(self, inputs: dict[str, Any]) -> torch.Tensor:
        """Greedy generation on processor outputs (torch or numpy arrays, moved to the model's
        device and dtype; anything else the processor returned is not a model input)."""
        tensors = {
            key: self.to_model(torch.as_tensor(value))
            for key, value in inputs.items()
            if isinstance(value, (torch.Tensor, np.ndarray))
        }
        return self.model.generate(**tensors, do_sample=False, num_beams=1, max_new_tokens=self.max_new_tokens)


def instructions_block(instructions: dict[str, str]) -> str:
    """Annotator instructions appended to a prompt, one paragraph per class; empty when none."""
    if not instructions:
        return ""
    lines = [f"- {name}: {text}" for name, text in instructions.items()]
    return "\n\nThe annotators labelled these objects following these instructions:\n" + "\n".join(lines)


class ChatJsonAdapter(TextAnswerAdapter):
    """A chat model that writes its boxes as JSON and is asked UOUO's questions as the
    benchmark writes them (Qwen-VL, LLaVA)."""

    def box_prompt(self, query: GroundingQuery) -> str:
        return query.box_prompt

    def quadrant_prompt(self, query: GroundingQuery) -> str:
        return query.quadrant_prompt

    def parse(self, text: str) -> BoxParse:
        return parse_json_boxes(text)
