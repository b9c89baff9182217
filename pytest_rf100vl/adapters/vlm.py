"""Chat models run here (Florence-2, Qwen-VL, PaliGemma, LLaVA): the transport and the
coordinates of a :class:`~pytest_rf100vl.adapters.text_answers.ChatAdapter` whose model is
a transformers checkpoint loaded here (:class:`~pytest_rf100vl.adapters.hf.TransformersModel`).

Each model family has a :class:`LocalTransport` of its own (how its processor is given an
image and a question, and the frame its answer is in); its adapter sets
``transformers_model``, ``model_class`` and ``build_tiny``, and builds its parts::

    class PaliGemmaAdapter(ChatAdapter[Image.Image, str]):
        transformers_model = True
        ...
        def __init__(self, checkpoint=None, device="cpu", dtype="float32", **options):
            super().__init__(checkpoint, device, dtype, **options)
            self.prompter = PaliGemmaPrompter(self.per_class)
            self.transport = PaliGemmaPrefix(*local_model(self, options))
            self.reader = Reader(self.name, parse_paligemma_locations, ReplyFrame(), self.tally)

Each model answers in its own coordinate space; its transport declares it once per answer as
a :class:`Reply` frame, and :class:`ReplyFrame` (with a bin offset) is the one place where
that space becomes pixels of the given image. Generation is greedy (no sampling, one beam);
the checkpoint's other generation settings apply. A tiny random model (``NAME:tiny``) rarely
writes its end token, so it generates :data:`TINY_MAX_NEW_TOKENS` tokens unless
``max_new_tokens`` is given: a smoke run checks the path, not the answers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic

import numpy as np
import torch
from PIL import Image

from pytest_rf100vl.adapters.base import TINY, ImageItem
from pytest_rf100vl.adapters.hf import TransformersModel, pad_elongated
from pytest_rf100vl.adapters.text_answers import Box, ChatAdapter, PromptT, Reply

TINY_TEXT: dict[str, int] = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    max_position_embeddings=2048,
)
"""The language model of every tiny text-answering model: two 32-wide layers (token ids apart)."""

TINY_MAX_NEW_TOKENS = 16
"""What a tiny random model generates per answer by default (a real checkpoint: the adapter's ``max_new_tokens``)."""


def local_model(adapter: ChatAdapter[Any, Any], given: Mapping[str, Any]) -> tuple[TransformersModel, int]:
    """``adapter``'s checkpoint loaded here, and the tokens it generates per answer: its option
    ``max_new_tokens``, or for a tiny random model :data:`TINY_MAX_NEW_TOKENS` unless the
    option was ``given`` (written into the adapter's options, so rows record it)."""
    if adapter.checkpoint == TINY and "max_new_tokens" not in given:
        adapter.options["max_new_tokens"] = TINY_MAX_NEW_TOKENS
    model_class, build_tiny = getattr(adapter, "model_class"), getattr(adapter, "build_tiny")
    weights = TransformersModel(adapter.name, model_class, build_tiny, adapter.checkpoint, adapter.device,
                                adapter.dtype, adapter.device_map, adapter.attention)
    return weights, int(adapter.options["max_new_tokens"])


class LocalTransport(ABC, Generic[PromptT]):
    """Answers of a transformers model loaded here: each image shown padded as for detection
    (:func:`~pytest_rf100vl.adapters.hf.pad_elongated`), greedy generation. A model family
    says how its processor takes images and questions and which frame its answers are in
    (:meth:`generate`, through :meth:`run_generate`).

    Example: PaliGemma's ``generate([image], ["detect cat"])`` gives the processor
    ``"<image>detect cat"`` and returns ``[Reply("<loc0100>...", (1024, 1024))]``."""

    def __init__(self, weights: TransformersModel, max_new_tokens: int):
        self.weights = weights
        self.max_new_tokens = max_new_tokens

    @property
    def revision(self) -> str | None:
        return self.weights.revision

    def view(self, item: ImageItem) -> Image.Image:
        return pad_elongated(item.image)

    @abstractmethod
    def generate(self, images: list[Image.Image], prompts: list[PromptT]) -> list[Reply]:
        """One answer per (image, question), in the frame its numbers are in."""

    def run_generate(self, inputs: Mapping[str, Any]) -> torch.Tensor:
        """Greedy generation on processor outputs (torch or numpy arrays, moved to the model's
        device and dtype; anything else the processor returned is not a model input)."""
        tensors = {
            key: self.weights.to_model(torch.as_tensor(value))
            for key, value in inputs.items()
            if isinstance(value, (torch.Tensor, np.ndarray))
        }
        with torch.inference_mode():
            return self.weights.model.generate(**tensors, do_sample=False, num_beams=1,
                                               max_new_tokens=self.max_new_tokens)

    def describe(self) -> dict[str, Any]:
        return {**self.weights.describe(), "compiled": False, "max_new_tokens": self.max_new_tokens}

    def close(self) -> None:
        self.weights.close()


@dataclass(frozen=True)
class ReplyFrame:
    """Coordinates in the reply's frame, scaled to the image and clipped to it; ``offset`` is
    added to every value first (0.5 reads a bin index as the bin's centre)."""

    offset: float = 0.0

    def to_pixels(self, box: Box, reply: Reply, image: Image.Image) -> tuple[float, ...]:
        scale_x, scale_y = image.width / reply.frame[0], image.height / reply.frame[1]
        x1, y1, x2, y2 = (value + self.offset for value in box)
        return (
            float(np.clip(x1 * scale_x, 0, image.width)),
            float(np.clip(y1 * scale_y, 0, image.height)),
            float(np.clip(x2 * scale_x, 0, image.width)),
            float(np.clip(y2 * scale_y, 0, image.height)),
        )
