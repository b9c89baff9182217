"""PaliGemma (default: PaliGemma 2 mix, 448 px): a prefix-prompted model whose task words
choose what it does, answering boxes as location tokens.

Prompts are the mix checkpoints' task prefixes:

- detection: ``"detect name1 ; name2"`` (one prompt with every class, or one per class
  with ``per_class=True``);
- UOUO box: ``"detect <target>"``; quadrant: ``"answer en <the quadrant question>"``.

Prompt mode ``names`` only: the ``detect`` prefix takes object names, nothing else.

Answers (``<locY1><locX1><locY2><locX2> name ; ...``) are read by
:func:`~pytest_rf100vl.adapters.parsing.parse_paligemma_locations`. Coordinate space:
1024 bins per axis over the image, ``y`` written first; a value maps to
``bin / 1024 * size`` as in big_vision's decoding.

Options: ``per_class`` (False), ``max_new_tokens`` (512: about 60 objects).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from PIL import Image
from transformers import (
    GemmaTokenizer,
    PaliGemmaConfig,
    PaliGemmaForConditionalGeneration,
    PaliGemmaProcessor,
    SiglipImageProcessor,
)

from pytest_rf100vl.adapters.base import GroundingQuery
from pytest_rf100vl.adapters.parsing import parse_paligemma_locations
from pytest_rf100vl.adapters.prompts import NamesPrompter
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.text_answers import ChatAdapter, Reader, Reply
from pytest_rf100vl.adapters.vlm import LocalTransport, ReplyFrame, local_model

BINS = 1024
IMAGE_TOKEN = "<image>"


class PaliGemmaPrompter(NamesPrompter):
    """The mix checkpoints' task prefixes: ``detect`` for boxes, ``answer en`` for the quadrant."""

    def detection(self, names: list[str], instructions: dict[str, str]) -> str:
        return "detect " + " ; ".join(names)

    def box_prompt(self, query: GroundingQuery) -> str:
        return f"detect {query.target}"

    def quadrant_prompt(self, query: GroundingQuery) -> str:
        return f"answer en {query.quadrant_prompt}"


class PaliGemmaPrefix(LocalTransport[str]):
    """The image token, then the prefix; answers in 1024 location bins."""

    def generate(self, images: list[Image.Image], prompts: list[str]) -> list[Reply]:
        # numpy, not torch: the processor builds training labels with np.array(), which warns on tensors
        processor = self.weights.processor
        inputs = processor(text=[IMAGE_TOKEN + prompt for prompt in prompts], images=images, padding=True,
                           return_tensors="np")
        inputs.pop("labels")
        output = self.run_generate(inputs)
        answers = processor.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        return [Reply(text, (BINS, BINS)) for text in answers]


class PaliGemmaAdapter(ChatAdapter[Image.Image, str]):
    name = "paligemma"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = PaliGemmaForConditionalGeneration
    transformers_model = True
    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False, "max_new_tokens": 512}

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.prompter = PaliGemmaPrompter(self.per_class)
        self.transport = PaliGemmaPrefix(*local_model(self, options))
        self.reader = Reader(self.name, parse_paligemma_locations, ReplyFrame(), self.tally)

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """Two 32-wide Gemma 2 layers on a two-layer SigLIP, 32-pixel images (16 image tokens).

        The vocabulary is Gemma's special tokens, the 256 byte-fallback tokens and printable
        ASCII; the processor adds ``<image>`` and the location and segmentation tokens."""
        import torch

        vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4}
        for byte in range(256):
            vocab[f"<0x{byte:02X}>"] = len(vocab)
        for symbol in ["▁"] + [chr(code) for code in range(33, 127)]:
            vocab.setdefault(symbol, len(vocab))
        tokenizer = GemmaTokenizer(vocab=vocab, merges=[])
        processor = PaliGemmaProcessor(
            image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}, image_seq_length=16),
            tokenizer=tokenizer,
        )
        config = PaliGemmaConfig(
            vision_config=dict(
                model_type="siglip_vision_model",
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                image_size=32,
                patch_size=8,
                vision_use_head=False,
            ),
            text_config=dict(
                model_type="gemma2",
                vocab_size=len(tokenizer),
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=1,
                head_dim=16,
                max_position_embeddings=1024,
                bos_token_id=2,
                eos_token_id=1,
                pad_token_id=0,
            ),
            image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
            vocab_size=len(tokenizer),
            projection_dim=32,
            hidden_size=32,
        )
        torch.manual_seed(0)
        PaliGemmaForConditionalGeneration(config).save_pretrained(folder)
        processor.save_pretrained(folder)
