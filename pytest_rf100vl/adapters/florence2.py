"""Florence-2 (the ``transformers``-native port, ``florence-community/Florence-2-*``): a
sequence-to-sequence model whose task tokens choose what it does, answering boxes as
location tokens.

Tasks used:

- multi-class detection: ``<CAPTION_TO_PHRASE_GROUNDING>`` with the class names as the
  caption, ``"name1. name2. name3"`` (Florence's ``<OD>`` names objects in its own
  vocabulary, which RF100-VL's classes would rarely match);
- one class name (``per_class=True``, or a dataset of one class):
  ``<OPEN_VOCABULARY_DETECTION>`` with that name;
- UOUO box: ``<OPEN_VOCABULARY_DETECTION>`` with the target's name. Florence-2 has no
  question-answering task, so the UOUO questions' text cannot be asked: the box question
  becomes its grounding task, the quadrant question is not asked and the scorer reads the
  quadrant from the box centre.

Prompt mode ``names`` only: a caption is grounded phrase by phrase, so instructions
appended to it would be grounded as objects.

Answers (``phrase<loc_x1><loc_y1><loc_x2><loc_y2>...``) are read by
:func:`~pytest_rf100vl.adapters.parsing.parse_florence_locations`. Coordinate space: 1000
bins per axis over the image, a bin read as its centre, ``(bin + 0.5) * size / 1000``, as
the processor's ``post_process_generation`` does (without its rounding to whole pixels).

Options: ``per_class`` (False), ``max_new_tokens`` (1024, the decoder's length).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from PIL import Image
from transformers import (
    BartTokenizer,
    CLIPImageProcessor,
    Florence2Config,
    Florence2ForConditionalGeneration,
    Florence2Processor,
)

from pytest_rf100vl.adapters.base import GroundingQuery
from pytest_rf100vl.adapters.hf import image_tensors
from pytest_rf100vl.adapters.parsing import parse_florence_locations
from pytest_rf100vl.adapters.prompts import NamesPrompter
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.text_answers import ChatAdapter, Reader, Reply
from pytest_rf100vl.adapters.vlm import LocalTransport, ReplyFrame, local_model

GROUNDING = "<CAPTION_TO_PHRASE_GROUNDING>"
OPEN_VOCABULARY = "<OPEN_VOCABULARY_DETECTION>"
BINS = 1000

POST_PROCESSOR_CONFIG = {
    "ocr": {"pattern": None, "area_threshold": 0.0},
    "phrase_grounding": {"banned_grounding_tokens": ["the image"]},
    "pure_text": {},
    "description_with_bboxes": {},
    "description_with_polygons": {},
    "polygons": {},
    "bboxes": {},
    "description_with_bboxes_or_polygons": {},
}
"""The post-processing rules the published checkpoints ship (for the tiny model's processor)."""


def byte_tokenizer() -> BartTokenizer:
    """A BART tokenizer over single bytes (no merges, no download) with Florence-2's task
    markup, its 1,000 location tokens and its image token."""
    from tokenizers import pre_tokenizers

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    markup = ["<od>", "</od>", "<ocr>", "</ocr>", "<poly>", "</poly>", "<sep>"]
    locations = [f"<loc_{i}>" for i in range(BINS)]
    return BartTokenizer(vocab=vocab, merges=[], image_token="<image>",
                         extra_special_tokens=markup + locations + ["<image>"])


class FlorencePrompter(NamesPrompter):
    """Florence-2's task tokens: phrase grounding of the class names as a caption, or
    open-vocabulary detection of one name; no question answering, so no quadrant question."""

    def detection(self, names: list[str], instructions: dict[str, str]) -> str:
        if len(names) == 1:
            return OPEN_VOCABULARY + names[0]
        return GROUNDING + ". ".join(names)

    def box_prompt(self, query: GroundingQuery) -> str:
        return OPEN_VOCABULARY + query.target

    def quadrant_prompt(self, query: GroundingQuery) -> None:
        return None


class FlorenceTasks(LocalTransport[str]):
    """A task prompt per image, the image resized on the model's device; answers in 1000 bins."""

    def generate(self, images: list[Image.Image], prompts: list[str]) -> list[Reply]:
        device = self.weights.torch_device
        inputs = self.weights.processor(text=prompts, images=image_tensors(images, device), padding=True,
                                        return_tensors="pt", device=device)  # resized on the model's device
        output = self.run_generate(inputs)
        answers = self.weights.processor.batch_decode(output, skip_special_tokens=False)
        return [Reply(text, (BINS, BINS)) for text in answers]


class Florence2Adapter(ChatAdapter[Image.Image, str]):
    name = "florence-2"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = Florence2ForConditionalGeneration
    transformers_model = True
    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False, "max_new_tokens": 1024}

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.prompter = FlorencePrompter(self.per_class)
        self.transport = FlorenceTasks(*local_model(self, options))
        self.reader = Reader(self.name, parse_florence_locations, ReplyFrame(offset=0.5), self.tally)

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A one-layer 32-wide BART on a two-stage DaViT, 64-pixel images (65 image tokens)."""
        import torch

        tokenizer = byte_tokenizer()
        image_processor = CLIPImageProcessor(
            size={"height": 64, "width": 64}, do_center_crop=False, image_seq_length=65
        )
        processor = Florence2Processor(
            image_processor=image_processor, tokenizer=tokenizer, post_processor_config=POST_PROCESSOR_CONFIG
        )
        config = Florence2Config(
            text_config=dict(
                model_type="bart",
                vocab_size=len(tokenizer),
                d_model=32,
                encoder_layers=1,
                decoder_layers=1,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                max_position_embeddings=1024,
                bos_token_id=0,
                pad_token_id=1,
                eos_token_id=2,
                decoder_start_token_id=2,
                forced_eos_token_id=2,
            ),
            vision_config=dict(
                depths=[1, 1],
                patch_size=[7, 3],
                patch_stride=[4, 2],
                patch_padding=[3, 1],
                patch_prenorm=[False, True],
                embed_dim=[16, 32],
                num_heads=[1, 2],
                num_groups=[1, 2],
                window_size=4,
                projection_dim=32,
                drop_path_rate=0.0,
            ),
            image_token_id=tokenizer.image_token_id,
        )
        torch.manual_seed(0)
        Florence2ForConditionalGeneration(config).save_pretrained(folder)
        processor.save_pretrained(folder)
