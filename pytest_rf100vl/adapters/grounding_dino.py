"""Grounding DINO, MM Grounding DINO and LLMDet (whose checkpoints are MM Grounding DINO's):
detection grounded in one caption, where every box scores every caption token.

Prompting follows RF100-VL's baseline: all class names, lower-cased, in one caption
``"c1 . c2 . c3 ."``. Each class's token span is found from the tokenizer's offsets;
a box takes the class whose span scores highest (a span's score is its best token
probability) and that score. The model reads at most ``max_text_len`` (256) tokens, so
when the names do not fit, the classes are split into several captions, the model runs
once per caption and the detections are merged. ``"."`` and ``"?"`` are the model's
phrase separators: inside names and descriptions they become spaces and commas.

``instructions`` mode writes each class as ``"name, description"``: the space a caption
has left after the names is shared equally among its classes, and each description is
cut at a token boundary to its share. Only the name's tokens score the class; the
description is context for the text encoder.

Fine-tuning (``--rf100vl-train fewshot_10``) follows the paper's few-shot baseline: recipe
``gdino-fewshot``, 5 epochs, batch 4, learning rate 3e-4 (AdamW), all class names in one
caption, through transformers' own Grounding DINO loss (Hungarian matching, focal loss over
the caption's tokens, L1 and GIoU). A box's class is its phrase's position in the caption;
when the names need several captions, each batch is run once per caption against the boxes
of its classes, and the losses are summed. There is no augmentation.

Options: ``box_threshold`` (0.05) keeps a box when its best token probability over the
whole caption exceeds it (Grounding DINO's box threshold); ``text_threshold`` (None: no
filter) also requires the class's span score to exceed it. Both are low by default
because AP rewards recall at low scores.
"""

from __future__ import annotations

import re
import string
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from PIL import Image
from torchvision.ops import box_convert
from transformers import (
    BertConfig,
    BertTokenizer,
    GroundingDinoConfig,
    GroundingDinoForObjectDetection,
    GroundingDinoImageProcessor,
    GroundingDinoProcessor,
    MMGroundingDinoConfig,
    MMGroundingDinoForObjectDetection,
    SwinConfig,
)

from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.base import Detections, DetectionTask, GroundingQuery, TrainingData
from pytest_rf100vl.adapters.hf import plain_text, read_back
from pytest_rf100vl.adapters.pipelined import PipelinedDetector
from pytest_rf100vl.adapters.registry import listed

if TYPE_CHECKING:
    from rf100vl_hf.training.samples import Sample
    from rf100vl_hf.training.store import FitRecord, TrainedStore

_SEPARATOR = " . "


@dataclass(frozen=True)
class Caption:
    """One caption and where each of its classes sits in its tokens."""

    text: str
    classes: tuple[int, ...]  # indices into the task's classes
    spans: tuple[tuple[int, int], ...]  # [start, end) token positions of each class name
    num_tokens: int


def clean_name(name: str) -> str:
    """A class name as a caption phrase: lower case, no phrase separators."""
    cleaned = " ".join(re.sub(r"[.?]", " ", name.lower()).split())
    return cleaned or "object"


def clean_description(text: str) -> str:
    """A description as caption context: lower-case plain text, sentences joined with commas."""
    return re.sub(r"\s*[.?]+", ",", plain_text(text).lower()).strip(" ,")


def _token_count(tokenizer: Any, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def _cut(tokenizer: Any, text: str, max_tokens: int) -> str:
    """``text`` cut to at most ``max_tokens`` tokens, at the end of a word where one fits."""
    if max_tokens <= 0:
        return ""
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    if len(offsets) <= max_tokens:
        return text
    end = offsets[max_tokens - 1][1]
    if text[end : end + 1].isalnum() and " " in text[:end]:  # the cut falls inside a word
        end = text.rindex(" ", 0, end)
    return text[:end].rstrip(" ,")


def _pack(costs: list[int], budget: int) -> list[list[int]]:
    """Consecutive groups of items whose costs add up to at most ``budget`` each."""
    groups: list[list[int]] = [[]]
    used = 0
    for index, cost in enumerate(costs):
        if groups[-1] and used + cost > budget:
            groups.append([])
            used = 0
        groups[-1].append(index)
        used += cost
    return [group for group in groups if group]


def _caption(tokenizer: Any, names: list[str], classes: list[int], descriptions: dict[int, str]) -> Caption:
    """Tokenize one caption and locate each class name's token span via the offsets."""
    text, char_spans = "", []
    for index, name in zip(classes, names):
        char_spans.append((len(text), len(text) + len(name)))
        text += name + (f", {descriptions[index]}" if descriptions.get(index) else "") + _SEPARATOR
    text = text.rstrip()
    encoding = tokenizer(text, return_offsets_mapping=True)
    offsets = encoding["offset_mapping"]
    spans = []
    for start, end in char_spans:
        inside = [i for i, (s, e) in enumerate(offsets) if e > s and s >= start and e <= end]
        if not inside:
            raise ValueError(f"class name {text[start:end]!r} has no token of its own in caption {text!r}")
        spans.append((inside[0], inside[-1] + 1))
    return Caption(text, tuple(classes), tuple(spans), len(encoding["input_ids"]))


def build_captions(
    classes: list[str], tokenizer: Any, max_tokens: int, descriptions: dict[str, str] | None = None
) -> list[Caption]:
    """Captions ``"c1 . c2 ."`` covering every class once, each at most ``max_tokens``
    tokens with the special tokens; with ``descriptions`` (class -> text), each class
    gets its share of the room the names leave (see the module docstring)."""
    special = len(tokenizer("")["input_ids"])
    separator = _token_count(tokenizer, _SEPARATOR)
    room = max_tokens - special - separator
    names = [clean_name(name) for name in classes]
    names = [_cut(tokenizer, name, room) for name in names]
    costs = [_token_count(tokenizer, name) + separator for name in names]
    captions = []
    pending = _pack(costs, max_tokens - special)
    while pending:
        group = pending.pop(0)
        texts: dict[int, str] = {}
        if descriptions:
            share = (max_tokens - special - sum(costs[i] for i in group)) // len(group)
            comma = _token_count(tokenizer, ",")
            for i in group:
                text = clean_description(descriptions.get(classes[i], ""))
                texts[i] = _cut(tokenizer, text, share - comma) if text else ""
        caption = _caption(tokenizer, [names[i] for i in group], group, texts)
        if caption.num_tokens > max_tokens and len(group) > 1:  # a tokenizer that merges across words
            half = len(group) // 2
            pending[:0] = [group[:half], group[half:]]
            continue
        captions.append(caption)
    return captions


def tiny_bert_tokenizer() -> BertTokenizer:
    """A WordPiece vocabulary of single characters (and their ``##`` continuations) in
    which [CLS], [SEP], "." and "?" have the ids the model hard-codes: 101, 102, 1012, 1029."""
    fixed = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, ".": 1012, "?": 1029}
    alnum = string.ascii_lowercase + string.digits
    pieces = list(alnum) + ["##" + c for c in alnum] + list("-_,:;!'()/&+%\"")
    free = (i for i in range(2000) if i not in fixed.values())
    by_id = {i: token for token, i in fixed.items()} | {next(free): piece for piece in pieces}
    size = max(by_id) + 1
    return BertTokenizer(vocab={by_id.get(i, f"[unused{i}]"): i for i in range(size)}, model_max_length=256)


class GroundingDinoAdapter(PipelinedDetector):
    """Grounding DINO; default checkpoint ``IDEA-Research/grounding-dino-tiny``."""

    name = "grounding-dino"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class: ClassVar[Any] = GroundingDinoForObjectDetection
    config_class: ClassVar[Any] = GroundingDinoConfig
    option_defaults: ClassVar[dict[str, Any]] = {"box_threshold": 0.05, "text_threshold": None}
    recipes: ClassVar[dict[str, Recipe]] = {
        "gdino-fewshot": Recipe("gdino-fewshot", epochs=5, batch_size=4, learning_rate=3e-4),
    }
    default_recipes: ClassVar[dict[str, str]] = dict.fromkeys(
        ("few-shot", "semi-supervised", "fully-supervised"), "gdino-fewshot")

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A one-block-per-stage Swin, a one-layer BERT, 32-wide deformable encoder and a
        two-layer decoder (the model needs at least two) with 30 queries, 64-96 pixel input."""
        tokenizer = tiny_bert_tokenizer()
        config = cls.config_class(
            backbone_config=SwinConfig(
                embed_dim=8,
                depths=[1, 1, 1, 1],
                num_heads=[1, 1, 1, 1],
                window_size=4,
                image_size=64,
                out_indices=[2, 3, 4],
            ),
            text_config=BertConfig(
                vocab_size=len(tokenizer),
                hidden_size=16,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=32,
                max_position_embeddings=256,
            ),
            d_model=32,  # GroupNorm(32, d_model) needs a multiple of 32
            encoder_layers=1,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            encoder_n_points=2,
            decoder_n_points=2,
            num_queries=30,
        )
        image_processor = GroundingDinoImageProcessor(size={"shortest_edge": 96, "longest_edge": 128})
        cls.model_class(config).save_pretrained(folder)
        GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        descriptions = task.instructions if task.prompt == "instructions" else None
        if descriptions is not None and not descriptions:
            warnings.warn(f"{task.dataset}: no class descriptions; captions hold the names only", stacklevel=2)
        self.captions = self._captions(task.classes, descriptions)
        self.encodings = [self.processor.tokenizer(c.text, return_tensors="pt") for c in self.captions]

    def fit(self, data: TrainingData, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        from rf100vl_hf.training.loop import train

        if recipe.federated:
            raise ValueError(f"recipe {recipe.name!r}: a federated loss is for closed-set detectors; Grounding "
                             f"DINO's loss is over caption tokens")
        self.restore_pretrained()
        self.set_task(replace(data.task, prompt="names"))
        return train(self.model, data.train, self.caption_loss, recipe, store, device=str(self.torch_device),
                     description=f"{self.name} on {data.task.dataset}")

    def caption_loss(self, samples: list["Sample"]) -> Any:
        """transformers' Grounding DINO loss of a batch, summed over the task's captions (each
        against the boxes of its own classes, labelled by their phrase's position in it)."""
        from rf100vl_hf.training.samples import normalized_targets

        vision = {key: self.to_model(value) for key, value in self.pixel_inputs([s.image for s in samples]).items()}
        targets = [normalized_targets(sample) for sample in samples]
        total, terms = None, {}
        for caption, encoding in zip(self.captions, self.encodings):
            position = {index: place for place, index in enumerate(caption.classes)}
            labels = []
            for boxes, classes in targets:
                kept = [i for i, c in enumerate(classes.tolist()) if c in position]
                labels.append({"class_labels": torch.tensor([position[classes[i]] for i in kept], dtype=torch.long,
                                                            device=self.torch_device),
                               "boxes": torch.as_tensor(boxes[kept], device=self.torch_device)})
            text = {key: value.expand(len(samples), -1).to(self.torch_device) for key, value in encoding.items()}
            outputs = self.model(**vision, **text, labels=labels)
            total = outputs.loss if total is None else total + outputs.loss
            for name, value in (outputs.loss_dict or {}).items():
                terms[name] = value if name not in terms else terms[name] + value
        return SimpleNamespace(loss=total, loss_dict=terms)

    def _captions(self, classes: list[str], descriptions: dict[str, str] | None) -> list[Caption]:
        return build_captions(classes, self.processor.tokenizer, self.model.config.max_text_len, descriptions)

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        if query is not None:  # answered through predict with the target as the only class
            return tuple(caption.text for caption in self._captions([query.target], None))
        return tuple(caption.text for caption in self.captions)

    def inputs(self, images: list[Image.Image]) -> dict[str, torch.Tensor]:
        """The processor's pixels and pixel mask, on the device."""
        return {key: self.to_model(value) for key, value in self.pixel_inputs(images).items()}

    def outputs(self, vision: dict[str, torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per caption: every query's token logits and ``cxcywh`` box."""
        batch = len(vision["pixel_values"])
        found = []
        for encoding in self.encodings:
            text = {key: self.to_model(value.expand(batch, -1)) for key, value in encoding.items()}
            outputs = self.model(**vision, **text)
            found.append((outputs.logits, outputs.pred_boxes))
        return found

    def detections(self, outputs: list[tuple[torch.Tensor, torch.Tensor]], images: list[Image.Image]) -> list[Detections]:
        """Each caption's boxes per image, in caption order."""
        sizes = torch.tensor([[image.width, image.height] * 2 for image in images], dtype=torch.float32)
        per_caption = [self.decode(logits, boxes, caption, sizes)
                       for (logits, boxes), caption in zip(outputs, self.captions)]
        return read_back([tuple(torch.cat(parts) for parts in zip(*per_image)) for per_image in zip(*per_caption)])

    def decode(
        self, logits: torch.Tensor, boxes: torch.Tensor, caption: Caption, sizes: torch.Tensor
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per image: boxes in pixels (``sizes`` holds ``w, h, w, h`` per image), the best
        class span's score and the class index in the task, on the device."""
        probs = logits.float().sigmoid()
        token_class = torch.full((probs.shape[-1],), len(caption.spans), dtype=torch.long, device=probs.device)
        for position, (start, end) in enumerate(caption.spans):
            token_class[start:end] = position
        per_span = probs.new_zeros(probs.shape[:-1] + (len(caption.spans) + 1,))
        per_span.scatter_reduce_(-1, token_class.expand_as(probs), probs, reduce="amax")
        scores, best = per_span[..., :-1].max(dim=-1)
        keep = probs.max(dim=-1).values > self.options["box_threshold"]
        if self.options["text_threshold"] is not None:
            keep &= scores > self.options["text_threshold"]
        pixels = box_convert(boxes.float(), "cxcywh", "xyxy") * sizes.to(boxes.device)[:, None, :]
        labels = torch.tensor(caption.classes, device=best.device)[best]
        rows, queries = keep.nonzero(as_tuple=True)
        counts = torch.bincount(rows, minlength=len(sizes)).tolist()
        return list(zip(*(t[rows, queries].split(counts) for t in (pixels, scores, labels))))


MM_ARCHITECTURE = (MMGroundingDinoForObjectDetection, MMGroundingDinoConfig)
"""MM Grounding DINO's model and config classes, which LLMDet's checkpoints share."""


class MMGroundingDinoAdapter(GroundingDinoAdapter):
    """MM Grounding DINO; default checkpoint
    ``openmmlab-community/mm_grounding_dino_tiny_o365v1_goldg_v3det``."""

    name = "mm-grounding-dino"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class, config_class = MM_ARCHITECTURE


class LlmDetAdapter(GroundingDinoAdapter):
    """LLMDet (Fu et al., CVPR 2025: MM Grounding DINO trained with a large language model's
    captions): its checkpoints are MM Grounding DINO's architecture and load as that model
    does, under a name of its own so that ``rf100vl-hf models`` lists it; default checkpoint
    ``iSEE-Laboratory/llmdet_tiny`` (``llmdet:iSEE-Laboratory/llmdet_base``, ``..._large``)."""

    name = "llmdet"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class, config_class = MM_ARCHITECTURE
