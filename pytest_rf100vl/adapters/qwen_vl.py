"""Qwen2.5-VL and Qwen3-VL: chat models that write their boxes as JSON.

Prompts (:mod:`~pytest_rf100vl.adapters.prompts`, printed in ``docs/prompts.md``), option
``prompt_style``:

- ``paper`` (default): the RF100-VL authors' system prompt and detection question for the
  family, in every prompt mode; in ``fewshot`` and ``instructions+fewshot`` modes the first
  ``fewshot_images`` (3) images of the few-shot split go first as a multi-turn chat, each
  answered by its ground truth in the model's own coordinates, through the checkpoint's chat
  template;
- ``appendix``: the paper's Appendix A wording where it has one (``docs/prompts.md``);
- ``cookbook``: the Qwen cookbook's question with the answer format spelled out (no system
  prompt, no few-shot prompt), as this adapter asked before.

UOUO questions are asked as written, inside the chat template. Answers are read by
:func:`~pytest_rf100vl.adapters.parsing.parse_json_boxes`.

Coordinate spaces, declared per answer by :class:`QwenChat` and converted by
:class:`~pytest_rf100vl.adapters.vlm.ReplyFrame`:

- Qwen2.5-VL answers in absolute pixels of its resized input (``smart_resize`` to
  multiples of ``patch_size * merge_size``); the frame is read back from the processor's
  ``image_grid_thw`` (grid height and width in patches, times ``patch_size``), and few-shot
  answers are written in the same pixels (the processor's ``min_pixels``/``max_pixels``).
- Qwen3-VL answers in coordinates relative to the image, 0..1000 on both axes.

Options: ``per_class`` (False), ``max_new_tokens`` (2048: about 80 JSON boxes),
``prompt_style`` (``paper``), ``fewshot_images`` (3).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image
from transformers import (
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2Tokenizer,
    Qwen2VLImageProcessor,
    Qwen2VLVideoProcessor,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
    Qwen3VLVideoProcessor,
)

from pytest_rf100vl.adapters.base import FewShotExample
from pytest_rf100vl.adapters.coordinates import BoxConvention
from pytest_rf100vl.adapters.hf import TransformersModel, pad_elongated
from pytest_rf100vl.adapters.parsing import parse_json_boxes
from pytest_rf100vl.adapters.prompts import PROMPT_STYLES, Conversation, ConversationPrompter, CookbookPrompter
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.text_answers import ChatAdapter, Reader, Reply
from pytest_rf100vl.adapters.vlm import TINY_TEXT, LocalTransport, ReplyFrame, local_model

SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")

TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""The Qwen chat layout, reduced to what the adapters send (the real checkpoints ship their own)."""


def chat_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """A conversation as chat-template messages: system, then each few-shot turn (its image
    and question, the ground-truth answer), then the question about the image asked."""

    def user(text: str) -> dict[str, Any]:
        parts = [{"type": "image"}, {"type": "text", "text": text}]
        return {"role": "user", "content": parts if conversation.image_first else parts[::-1]}

    def said(role: str, text: str) -> dict[str, Any]:
        return {"role": role, "content": [{"type": "text", "text": text}]}

    messages = [said("system", conversation.system)] if conversation.system is not None else []
    for example in conversation.examples:
        messages += [user(example.text), said("assistant", example.answer)]
    return [*messages, user(conversation.text)]


def tiny_qwen_tokenizer() -> Qwen2Tokenizer:
    """A byte-level BPE over the 256 byte symbols (no merges: one token per byte) and the chat and vision tokens."""
    from tokenizers import pre_tokenizers

    vocab = {"<|endoftext|>": 0}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    return Qwen2Tokenizer(vocab=vocab, merges=[], extra_special_tokens=list(SPECIAL_TOKENS))


def padded_example(example: FewShotExample) -> FewShotExample:
    """A few-shot example padded as the image asked about is (its answer is in that frame)."""
    return replace(example, image=pad_elongated(example.image))


class QwenChat(LocalTransport[str | Conversation]):
    """Batched generation through the checkpoint's chat template: a conversation's few-shot
    images go before the image asked about, in the order of their turns. Answers are framed
    in ``units`` (Qwen3-VL: 0..1000), or when ``units`` is ``None`` in pixels of the resized
    input, read back from the processor's ``image_grid_thw`` (Qwen2.5-VL)."""

    def __init__(self, weights: TransformersModel, max_new_tokens: int, units: tuple[float, float] | None):
        super().__init__(weights, max_new_tokens)
        self.units = units
        weights.processor.tokenizer.padding_side = "left"  # decoder-only: answers start where every prompt ends

    def generate(self, images: list[Image.Image], prompts: list[str | Conversation]) -> list[Reply]:
        processor = self.weights.processor
        conversations = [p if isinstance(p, Conversation) else Conversation(None, (), p) for p in prompts]
        texts = [
            processor.apply_chat_template(chat_messages(conversation), tokenize=False, add_generation_prompt=True)
            for conversation in conversations
        ]
        shown = [
            picture
            for conversation, image in zip(conversations, images)
            for picture in (*(example.image for example in conversation.examples), image)
        ]
        inputs = processor(text=texts, images=shown, padding=True, return_tensors="pt")
        output = self.run_generate(inputs)
        answers = processor.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        grids = inputs["image_grid_thw"].tolist()
        asked, position = [], -1
        for conversation in conversations:
            position += len(conversation.examples) + 1
            asked.append(position)  # the image asked about is each conversation's last
        return [Reply(text, self.frame(grids[i])) for text, i in zip(answers, asked)]

    def frame(self, grid_thw: list[int]) -> tuple[float, float]:
        """The ``(width, height)`` of the space the answers are in, for an image the processor
        cut into ``grid_thw`` patches."""
        if self.units is not None:
            return self.units
        patch = self.weights.processor.image_processor.patch_size
        return (grid_thw[2] * patch, grid_thw[1] * patch)


class QwenVLAdapter(ChatAdapter[Image.Image, str | Conversation]):
    """What both Qwen generations share: the paper's or the cookbook's prompts, the chat
    template, JSON answers, batched generation."""

    transformers_model = True
    model_class: ClassVar[Any]
    processor_class: ClassVar[Any]
    video_processor_class: ClassVar[Any]
    config_class: ClassVar[Any]
    native_patch_size: ClassVar[int]
    """The architecture's vision patch size, for the tiny model (the processor's own is used at run time)."""
    family: ClassVar[str]
    """The model family of :mod:`~pytest_rf100vl.adapters.prompts` whose paper prompts it is asked."""
    answer_units: ClassVar[tuple[float, float] | None]
    """The frame of its answers (:class:`QwenChat`)."""
    option_defaults: ClassVar[dict[str, Any]] = {
        "per_class": False, "max_new_tokens": 2048, "prompt_style": "paper", "fewshot_images": 3, "scores": "one",
        "prompt_file": "",
    }

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.prompt_style = str(self.options["prompt_style"])
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"adapter {self.name!r}: option prompt_style={self.prompt_style!r} "
                             f"(use one of {', '.join(PROMPT_STYLES)})")
        self.fewshot_images = int(self.options["fewshot_images"])
        if self.fewshot_images < 1:
            raise ValueError(f"adapter {self.name!r}: option fewshot_images={self.fewshot_images} (at least 1)")
        if self.scores == "ask" and self.prompt_style == "cookbook":
            raise ValueError(f"adapter {self.name!r}: scores=ask asks in the paper's prompts; prompt_style=cookbook "
                             "has no such question (use prompt_style=paper or appendix)")
        self.transport = QwenChat(*local_model(self, options), units=self.answer_units)
        self.prompter = (
            CookbookPrompter(self.per_class, f"adapter {self.name!r}") if self.prompt_style == "cookbook"
            else ConversationPrompter(self.prompt_style, self.family, self.per_class, self.convention(self.transport.weights),
                                      self.fewshot_images, shown=padded_example, ask_scores=self.scores == "ask"))
        self.reader = Reader(self.name, parse_json_boxes, ReplyFrame(), self.tally)

    @classmethod
    @abstractmethod
    def convention(cls, weights: TransformersModel) -> BoxConvention:
        """Where this model's numbers live (few-shot answers are written in it)."""

    def pair_columns(self) -> dict[str, Any]:
        """The prompt style, a hash of the exact prompts of the pair's task (``None`` in UOUO), the
        source of the boxes' scores (option ``scores``) and the prompt file used."""
        return {"prompt_style": self.prompt_style, **self.chat_columns()}

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """Two 32-wide text layers and two vision layers; inputs capped at 16 merged patches."""
        import torch

        tokenizer = tiny_qwen_tokenizer()
        ids = dict(zip(SPECIAL_TOKENS, tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
        unit = cls.native_patch_size * 2  # patch_size * merge_size
        size = {"shortest_edge": unit * unit * 4, "longest_edge": unit * unit * 16}
        processor = cls.processor_class(
            image_processor=Qwen2VLImageProcessor(size=size, patch_size=cls.native_patch_size),
            video_processor=cls.video_processor_class(size=size, patch_size=cls.native_patch_size),
            tokenizer=tokenizer,
            chat_template=TINY_CHAT_TEMPLATE,
        )
        config = cls.config_class(
            text_config=cls.tiny_text_config(len(tokenizer), eos=ids["<|im_end|>"]),
            vision_config=cls.tiny_vision_config(),
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
        )
        torch.manual_seed(0)
        model = cls.model_class(config)
        model.generation_config.eos_token_id = ids["<|im_end|>"]
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(folder)
        processor.save_pretrained(folder)

    @classmethod
    def tiny_text_config(cls, vocab_size: int, eos: int) -> dict[str, Any]:
        return dict(
            vocab_size=vocab_size,
            **TINY_TEXT,
            bos_token_id=0,
            eos_token_id=eos,
            pad_token_id=0,
        )

    @classmethod
    def tiny_vision_config(cls) -> dict[str, Any]:
        return dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=32,
            patch_size=cls.native_patch_size,
            spatial_merge_size=2,
            temporal_patch_size=2,
        )


class Qwen25VLAdapter(QwenVLAdapter):
    """Qwen2.5-VL: absolute pixel coordinates of its resized input."""

    name = "qwen2.5-vl"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = Qwen2_5_VLForConditionalGeneration
    processor_class = Qwen2_5_VLProcessor
    video_processor_class = Qwen2VLVideoProcessor
    config_class = Qwen2_5_VLConfig
    native_patch_size = 14
    family = "qwen2.5"
    answer_units = None

    @classmethod
    def convention(cls, weights: TransformersModel) -> BoxConvention:
        size = weights.processor.image_processor.size
        return BoxConvention("qwen2.5", min_pixels=size["shortest_edge"], max_pixels=size["longest_edge"])

    @classmethod
    def tiny_text_config(cls, vocab_size: int, eos: int) -> dict[str, Any]:
        rope = {"rope_type": "default", "mrope_section": [1, 1, 2], "rope_theta": 10000.0}
        return {**super().tiny_text_config(vocab_size, eos), "rope_parameters": rope}

    @classmethod
    def tiny_vision_config(cls) -> dict[str, Any]:
        return {**super().tiny_vision_config(), "fullatt_block_indexes": [1], "window_size": 56}


class Qwen3VLAdapter(QwenVLAdapter):
    """Qwen3-VL: coordinates relative to the image, 0..1000."""

    name = "qwen3-vl"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = Qwen3VLForConditionalGeneration
    processor_class = Qwen3VLProcessor
    video_processor_class = Qwen3VLVideoProcessor
    config_class = Qwen3VLConfig
    native_patch_size = 16
    family = "qwen3"
    answer_units = (1000.0, 1000.0)

    @classmethod
    def convention(cls, weights: TransformersModel) -> BoxConvention:
        return BoxConvention("qwen3")

    @classmethod
    def tiny_text_config(cls, vocab_size: int, eos: int) -> dict[str, Any]:
        rope = {"rope_type": "default", "mrope_section": [2, 1, 1], "mrope_interleaved": True, "rope_theta": 10000.0}
        return {**super().tiny_text_config(vocab_size, eos), "head_dim": 8, "rope_parameters": rope}

    @classmethod
    def tiny_vision_config(cls) -> dict[str, Any]:
        return {**super().tiny_vision_config(), "num_position_embeddings": 64, "deepstack_visual_indexes": [0]}
