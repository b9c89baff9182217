"""LLaVA-1.5, LLaVA-1.6 (NeXT) and LLaVA-OneVision, the ``llava-hf`` ports in transformers:
chat models that write their boxes as text.

Detection prompt (LLaVA's grounding question, with the answer format spelled out)::

    Please provide the bounding box coordinates of every object of the following
    categories: "a", "b". Answer in JSON format, as a list of {"bbox": [x1, y1, x2, y2],
    "label": "<category>"} with coordinates between 0 and 1, using the category names
    exactly as given.

In ``instructions`` mode the classes' annotator instructions follow. UOUO questions are
asked as written, inside the checkpoint's chat template. Answers are read by
:func:`~pytest_rf100vl.adapters.parsing.parse_json_boxes`, which also takes the bare
``[x1, y1, x2, y2]`` the models were trained to write.

Coordinate space, the same for the three families, converted in
:class:`SquareFrame`: ``[x1, y1, x2, y2]`` as fractions (0..1) of the
image *padded to a square*, the short side padded equally on both sides (the original
LLaVA ``expand2square``: the image pasted at ``((S - w) // 2, (S - h) // 2)`` on an
``S = max(w, h)`` square). A value ``v`` is the pixel ``v * S - offset`` of the image.

- LLaVA-1.5 was trained on the ``llava_v1_5_mix665k`` grounding data (RefCOCO, Visual
  Genome), whose boxes are normalised to the ``expand2square`` image its training padded
  to (``image_aspect_ratio=pad``, background the CLIP mean): haotian-liu/LLaVA issues
  #606 (worked out from the training code and checked on samples), #1833, and
  TRI-ML/vlm-evaluation #16, which cites it; #623 and #822 ask whether the RefCOCO samples
  follow it too, without an answer from the authors. transformers' port does not pad:
  ``llava-hf/llava-1.5-7b-hf`` ships the ``CLIPImageProcessor`` of
  ``openai/clip-vit-large-patch14-336`` (``convert_llava_weights_to_hf.py``), which
  resizes the short side to 336 and centre-crops 336x336 (``crop_size``; no ``do_pad``):
  it would cut a non-square image and put the answers in the frame of the crop. So this adapter pads
  every image itself, exactly as ``expand2square`` did (transformers'
  ``LlavaImageProcessor.pad_to_square``, behind ``do_pad=False`` by default, is the same
  operation), and the processor's crop then keeps the whole square.
- LLaVA-1.6 (NeXT) feeds the image at any resolution: a plain resize of the whole image
  to the base size plus aspect-preserving tiles whose padding is removed from the
  features (LLaVA-NeXT ``mm_utils.process_anyres_image``; transformers'
  ``LlavaNextImageProcessor`` does the same), so the model never sees a padded square.
  Its instruction data (``lmms-lab/LLaVA-NeXT-Data``) is the LLaVA-1.5 mixture with
  TextCaps removed and document, chart and GPT-V conversation data added; the grounding
  samples are LLaVA-1.5's, unchanged, so the boxes it learned to write are still
  fractions of the padded square (haotian-liu/LLaVA #1158 asked whether they were
  adapted to anyres; neither the data card nor the LLaVA-NeXT training code touches a
  box). The image
  goes to the processor as it is (the tiling it was trained with); answers are read in
  the padded-square frame.
- LLaVA-OneVision (``anyres_max_9``, SigLIP) tiles the same way (transformers'
  ``LlavaOnevisionImageProcessor`` pads to a square only the images of multi-image
  prompts). Its single-image and OneVision stages (LLaVA-NeXT
  ``scripts/train/single_image.yaml``, ``onevision.yaml``) train on the LLaVA-NeXT
  mixture (``llava_next_fit_mix_filtered_text_wild_738590.json``, "released in
  lmms-lab/LLaVA-NeXT-Data"), the one data set of those stages, by the names listed,
  whose answers are boxes: it writes the same frame.

CogVLM needs ``trust_remote_code`` and is not in transformers: run it behind a server
that serves it through an OpenAI-compatible endpoint (LMDeploy, SGLang) and benchmark it
with the ``openai`` adapter.

Options: ``per_class`` (False), ``max_new_tokens`` (1024: about 30 JSON boxes).
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from PIL import Image
from transformers import (
    CLIPImageProcessor,
    LlamaTokenizer,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaNextConfig,
    LlavaNextForConditionalGeneration,
    LlavaNextImageProcessor,
    LlavaNextProcessor,
    LlavaOnevisionConfig,
    LlavaOnevisionForConditionalGeneration,
    LlavaOnevisionImageProcessor,
    LlavaOnevisionProcessor,
    LlavaOnevisionVideoProcessor,
    LlavaProcessor,
    PreTrainedTokenizerBase,
    Qwen2Tokenizer,
)

from pytest_rf100vl.adapters.coordinates import BoxConvention
from pytest_rf100vl.adapters.hf import TransformersModel
from pytest_rf100vl.adapters.parsing import parse_json_boxes
from pytest_rf100vl.adapters.prompts import NamesPrompter, instructions_block
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.text_answers import Box, ChatAdapter, Reader, Reply
from pytest_rf100vl.adapters.vlm import TINY_TEXT, LocalTransport, ReplyFrame, local_model

IMAGE_TOKEN = "<image>"
SQUARE = BoxConvention("square")
SQUARE_FRAME = (1.0, 1.0)
"""The extent of the padded square in the answers' units: coordinates are fractions of it."""

TINY_SIDE, TINY_PATCH = 32, 8
"""The tiny models' vision input (pixels) and patch: 16 patches per view."""

VICUNA_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'].upper() }}: "
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %} {% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)
"""The Vicuna layout of LLaVA-1.5 and LLaVA-1.6 (``USER: <image>\\n... ASSISTANT:``),
reduced to what the adapters send (the real checkpoints ship their own)."""

QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""The Qwen2 layout of LLaVA-OneVision, reduced the same way."""


def expand2square(image: Image.Image, background: tuple[int, ...]) -> Image.Image:
    """The image centred on a square of its long side, as LLaVA-1.5 was trained (the
    original LLaVA ``expand2square``; the offset rounds down)."""
    width, height = image.size
    if width == height:
        return image
    side = max(width, height)
    square = Image.new(image.mode, (side, side), background)
    square.paste(image, ((side - width) // 2, (side - height) // 2))
    return square


def tiny_llama_tokenizer() -> LlamaTokenizer:
    """A byte-fallback Llama tokenizer (printable ASCII and the 256 byte tokens, no merges)
    with LLaVA's ``<image>`` and ``<pad>`` tokens."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for symbol in ["▁"] + [chr(code) for code in range(33, 127)]:
        vocab.setdefault(symbol, len(vocab))
    return LlamaTokenizer(vocab=vocab, merges=[], pad_token="<pad>", extra_special_tokens=[IMAGE_TOKEN])


def tiny_qwen2_tokenizer() -> Qwen2Tokenizer:
    """A byte-level Qwen2 tokenizer (one token per byte) with the chat, image and video tokens."""
    from tokenizers import pre_tokenizers

    vocab = {"<|endoftext|>": 0}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    return Qwen2Tokenizer(
        vocab=vocab, merges=[], extra_special_tokens=["<|im_start|>", "<|im_end|>", IMAGE_TOKEN, "<video>"]
    )


def tiny_clip_vision() -> dict[str, Any]:
    """A two-layer CLIP vision tower of 32-pixel views (LLaVA-1.5 and 1.6 use CLIP ViT-L/336)."""
    return dict(
        model_type="clip_vision_model",
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=TINY_SIDE,
        patch_size=TINY_PATCH,
        projection_dim=32,
    )


def tiny_text(tokenizer: PreTrainedTokenizerBase, model_type: str, eos: int) -> dict[str, Any]:
    """Two 32-wide layers of the language model ``model_type``, answers ended by ``eos``."""
    return dict(
        model_type=model_type,
        vocab_size=len(tokenizer),
        **TINY_TEXT,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )


def vicuna_config(config_class: Any, tokenizer: PreTrainedTokenizerBase, **extra: Any) -> Any:
    """A tiny LLaVA-1.5/1.6 configuration: the tiny CLIP tower and a tiny Llama (Vicuna's architecture)."""
    return config_class(
        vision_config=tiny_clip_vision(),
        text_config=tiny_text(tokenizer, "llama", tokenizer.eos_token_id),
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        image_seq_length=(TINY_SIDE // TINY_PATCH) ** 2,
        **extra,
    )


def vicuna_processor(processor_class: Any, image_processor: Any, tokenizer: PreTrainedTokenizerBase) -> Any:
    """A tiny LLaVA-1.5/1.6 processor: a CLIP tower of 32-pixel views and Vicuna's chat layout."""
    return processor_class(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=TINY_PATCH,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's class token, dropped by the "default" strategy
        chat_template=VICUNA_CHAT_TEMPLATE,
    )


class LlavaPrompter(NamesPrompter):
    """LLaVA's grounding question with the answer format spelled out, instructions after it."""

    def detection(self, names: list[str], instructions: dict[str, str]) -> str:
        categories = ", ".join(f'"{name}"' for name in names)
        return (
            f"Please provide the bounding box coordinates of every object of the following categories: {categories}. "
            'Answer in JSON format, as a list of {"bbox": [x1, y1, x2, y2], "label": "<category>"} '
            "with coordinates between 0 and 1, using the category names exactly as given."
            + instructions_block(instructions)
        )


class LlavaChat(LocalTransport[str]):
    """Batched generation through the checkpoint's chat template, one image and one question
    per conversation; the image padded to a square first where the model was trained so
    (``pads_to_square``, with the processor's mean colour). Answers are in the padded-square frame."""

    def __init__(self, weights: TransformersModel, max_new_tokens: int, pads_to_square: bool):
        super().__init__(weights, max_new_tokens)
        self.pads_to_square = pads_to_square
        weights.processor.tokenizer.padding_side = "left"  # decoder-only: answers start where every prompt ends

    def model_images(self, images: list[Image.Image]) -> list[Image.Image]:
        """The images as the processor gets them."""
        if not self.pads_to_square:
            return images
        background = tuple(int(mean * 255) for mean in self.weights.processor.image_processor.image_mean)
        return [expand2square(image, background) for image in images]

    def generate(self, images: list[Image.Image], prompts: list[str]) -> list[Reply]:
        processor = self.weights.processor
        texts = [
            processor.apply_chat_template(
                [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}],
                tokenize=False,
                add_generation_prompt=True,
            )
            for prompt in prompts
        ]
        inputs = processor(text=texts, images=self.model_images(images), padding=True, return_tensors="pt")
        output = self.run_generate(inputs)
        answers = processor.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
        return [Reply(text, SQUARE_FRAME) for text in answers]


class SquareFrame:
    """A box in the padded-square frame (the ``square`` convention of ``coordinates.py``) as
    ``xyxy`` pixels of the image, clipped to it."""

    def to_pixels(self, box: Box, reply: Reply, image: Image.Image) -> tuple[float, ...]:
        pixels = SQUARE.to_pixels(box, image.width, image.height)
        return ReplyFrame().to_pixels(pixels, Reply(reply.text, image.size), image)  # type: ignore[arg-type]


class LlavaFamilyAdapter(ChatAdapter[Image.Image, str]):
    """What the three share: the prompts, the chat template, JSON answers, batched
    generation, the padded-square frame and the tiny model's recipe."""

    transformers_model = True
    model_class: ClassVar[Any]
    option_defaults: ClassVar[dict[str, Any]] = {"per_class": False, "max_new_tokens": 1024}
    pads_to_square: ClassVar[bool] = False
    """True where the model was trained on padded squares that the processor does not make
    (LLaVA-1.5): the adapter pads before the processor. The others tile the image as they
    were trained; their answers are in the padded-square frame all the same."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.prompter = LlavaPrompter(self.per_class)
        self.transport = LlavaChat(*local_model(self, options), pads_to_square=self.pads_to_square)
        self.reader = Reader(self.name, parse_json_boxes, SquareFrame(), self.tally)

    # ------------------------------------------------------------------ tiny models

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """Two 32-wide text layers on a two-layer vision tower of 32-pixel views (16 patches)."""
        import torch

        tokenizer = cls.tiny_tokenizer()
        processor = cls.tiny_processor(tokenizer)
        torch.manual_seed(0)
        model = cls.model_class(cls.tiny_config(tokenizer))
        model.generation_config.eos_token_id = cls.tiny_eos(tokenizer)
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(folder)
        processor.save_pretrained(folder)

    @classmethod
    def tiny_tokenizer(cls) -> PreTrainedTokenizerBase:
        return tiny_llama_tokenizer()

    @classmethod
    def tiny_eos(cls, tokenizer: PreTrainedTokenizerBase) -> int:
        """The token that ends an answer (the end of the assistant's turn)."""
        return tokenizer.eos_token_id

    @classmethod
    @abstractmethod
    def tiny_processor(cls, tokenizer: PreTrainedTokenizerBase) -> Any:
        """The processor of the tiny model: the real checkpoint's classes and settings, 32-pixel views."""

    @classmethod
    @abstractmethod
    def tiny_config(cls, tokenizer: PreTrainedTokenizerBase) -> Any:
        """The tiny model's configuration: the real architecture, 32 wide."""


class LlavaAdapter(LlavaFamilyAdapter):
    """LLaVA-1.5: CLIP ViT-L/336 and Vicuna; one 336-pixel view of the image padded to a square."""

    name = "llava"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = LlavaForConditionalGeneration
    pads_to_square = True

    @classmethod
    def tiny_processor(cls, tokenizer: PreTrainedTokenizerBase) -> LlavaProcessor:
        image_processor = CLIPImageProcessor(
            size={"shortest_edge": TINY_SIDE}, crop_size={"height": TINY_SIDE, "width": TINY_SIDE}
        )
        return vicuna_processor(LlavaProcessor, image_processor, tokenizer)

    @classmethod
    def tiny_config(cls, tokenizer: PreTrainedTokenizerBase) -> LlavaConfig:
        return vicuna_config(LlavaConfig, tokenizer)


class LlavaNextAdapter(LlavaFamilyAdapter):
    """LLaVA-1.6 (NeXT): CLIP ViT-L/336 and Vicuna; any-resolution tiles plus a base view."""

    name = "llava-next"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = LlavaNextForConditionalGeneration
    tiny_grid = [[32, 64], [64, 32], [64, 64], [96, 32], [32, 96]]
    """The checkpoint's grid (336x672, 672x336, 672x672, 1008x336, 336x1008) at 32-pixel tiles."""

    @classmethod
    def tiny_processor(cls, tokenizer: PreTrainedTokenizerBase) -> LlavaNextProcessor:
        image_processor = LlavaNextImageProcessor(
            size={"shortest_edge": TINY_SIDE},
            crop_size={"height": TINY_SIDE, "width": TINY_SIDE},
            image_grid_pinpoints=cls.tiny_grid,
        )
        return vicuna_processor(LlavaNextProcessor, image_processor, tokenizer)

    @classmethod
    def tiny_config(cls, tokenizer: PreTrainedTokenizerBase) -> LlavaNextConfig:
        return vicuna_config(LlavaNextConfig, tokenizer, image_grid_pinpoints=cls.tiny_grid)


class LlavaOnevisionAdapter(LlavaFamilyAdapter):
    """LLaVA-OneVision: SigLIP-so400m/384 and Qwen2; any-resolution tiles up to 6x6 (``anyres_max_9``)."""

    name = "llava-onevision"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = LlavaOnevisionForConditionalGeneration
    tiny_grid = [[32 * rows, 32 * cols] for rows in (1, 2, 3) for cols in (1, 2, 3)]
    """The checkpoint's 384-pixel grid (1x1 to 6x6 tiles), cut to 3x3 at 32-pixel tiles."""

    @classmethod
    def tiny_tokenizer(cls) -> Qwen2Tokenizer:
        return tiny_qwen2_tokenizer()

    @classmethod
    def tiny_eos(cls, tokenizer: PreTrainedTokenizerBase) -> int:
        return tokenizer.convert_tokens_to_ids("<|im_end|>")

    @classmethod
    def tiny_processor(cls, tokenizer: PreTrainedTokenizerBase) -> LlavaOnevisionProcessor:
        size = {"height": TINY_SIDE, "width": TINY_SIDE}
        return LlavaOnevisionProcessor(
            image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=cls.tiny_grid),
            video_processor=LlavaOnevisionVideoProcessor(size=size),
            tokenizer=tokenizer,
            num_image_tokens=(TINY_SIDE // TINY_PATCH) ** 2,
            vision_feature_select_strategy="full",
            vision_aspect_ratio="anyres_max_9",
            chat_template=QWEN_CHAT_TEMPLATE,
        )

    @classmethod
    def tiny_config(cls, tokenizer: PreTrainedTokenizerBase) -> LlavaOnevisionConfig:
        vision = dict(
            model_type="siglip_vision_model",
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            image_size=TINY_SIDE,
            patch_size=TINY_PATCH,
            vision_use_head=False,
        )
        return LlavaOnevisionConfig(
            vision_config=vision,
            text_config=tiny_text(tokenizer, "qwen2", cls.tiny_eos(tokenizer)),
            image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
            video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
            image_grid_pinpoints=cls.tiny_grid,
            vision_feature_select_strategy="full",
            vision_feature_layer=-1,
            vision_aspect_ratio="anyres_max_9",
        )
