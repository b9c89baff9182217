"""OWL-ViT and OWLv2: every image patch predicts a box and an embedding, and a box's score
for a class is the (learned, shifted and scaled) similarity of its embedding to that
class's query embedding.

Prompting follows RF100-VL's baseline runner: one query per class, ``"a photo of a {name}"``,
score threshold 0.01, then class-wise NMS. The queries are embedded once per dataset in
:meth:`OwlAdapter.set_task`; each batch then only runs the image tower. Prompt modes:

- ``names``: the templated class name (option ``template``).
- ``instructions``: the first sentence of the class's description, prefixed with
  ``"{name}: "`` when the sentence does not mention the name. OWL's text tower reads 16
  tokens; the tokenizer keeps the first 14 and the start and end tokens, so a long
  sentence loses its end, never the class name. Classes without a description fall back
  to ``names`` (with a warning).
- ``fewshot``: image-conditioned queries. Each few-shot image goes through the image
  tower; for each annotated box, the predicted box that overlaps it most (IoU) gives its
  class embedding; a class's query is the mean of its boxes' unit-normalised embeddings.
  This is OWL's image-guided detection with the query box chosen by the annotation
  instead of by objectness. Classes with no few-shot box fall back to their text query
  (with a warning).

Boxes go through the processor's own post-processing with the original image size:
OWLv2 pads each image to a square at the bottom or right before resizing, and its
post-processing scales by the longer side; OWL-ViT stretches to a square and scales by
width and height. Options: ``score_threshold`` (0.01), ``nms_iou`` (0.5, IoU above
which a lower-scored box of the same class is suppressed), ``template``.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image
from torchvision.ops import batched_nms, box_iou
from tqdm.auto import tqdm
from transformers import (
    Owlv2Config,
    Owlv2ForObjectDetection,
    Owlv2ImageProcessor,
    Owlv2Processor,
    OwlViTConfig,
    OwlViTForObjectDetection,
    OwlViTImageProcessor,
    OwlViTProcessor,
)

from pytest_rf100vl.adapters.base import Detections, DetectionTask, FewShotExample
from pytest_rf100vl.adapters.hf import HFDetector, plain_text, tiny_clip_tokenizer, to_numpy

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def instruction_query(name: str, text: str) -> str:
    """The query for a class in ``instructions`` mode (see the module docstring)."""
    sentence = _SENTENCE_END.split(plain_text(text), maxsplit=1)[0].strip()
    if not sentence:
        return ""
    return sentence if name.lower() in sentence.lower() else f"{name}: {sentence}"


class OwlAdapter(HFDetector):
    """The OWL family; subclasses name the architecture's classes."""

    config_class: ClassVar[Any]
    image_processor_class: ClassVar[Any]
    processor_class: ClassVar[Any]
    prompt_modes = ("names", "instructions", "fewshot")
    option_defaults: ClassVar[dict[str, Any]] = {"score_threshold": 0.01, "nms_iou": 0.5, "template": "a photo of a {}"}

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """Text and vision towers of one 32-wide layer, 96-pixel images in 16-pixel patches."""
        tokenizer = tiny_clip_tokenizer(16)
        config = cls.config_class(
            text_config=dict(
                vocab_size=len(tokenizer),
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                max_position_embeddings=16,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            ),
            vision_config=dict(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                image_size=96,
                patch_size=16,
            ),
            projection_dim=32,
        )
        image_processor = cls.image_processor_class(
            size={"height": 96, "width": 96}, crop_size={"height": 96, "width": 96}
        )
        model = cls.model_class(config)
        # OWL-ViT's default init saturates the box sigmoid; small offsets keep random boxes
        # near their patch, spread over the image like a trained model's
        torch.nn.init.normal_(model.box_head.dense2.weight, std=0.01)
        model.save_pretrained(folder)
        cls.processor_class(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        with torch.inference_mode():
            self.queries = self._queries(task) if task.classes else None

    def _queries(self, task: DetectionTask) -> torch.Tensor:
        """One query embedding per class, ``(classes, dim)``."""
        template = self.options["template"]
        texts = [template.format(name) for name in task.classes]
        if task.prompt == "instructions":
            described = [instruction_query(name, task.instructions.get(name, "")) for name in task.classes]
            missing = [name for name, text in zip(task.classes, described) if not text]
            if missing:
                warnings.warn(
                    f"{task.dataset}: no description for {missing}; their queries use the class name", stacklevel=3
                )
            texts = [d or t for d, t in zip(described, texts)]
        queries = self._text_embeddings(texts)
        if task.prompt == "fewshot":
            image_queries, found = self._image_queries(task.fewshot, len(task.classes))
            missing = [name for name, ok in zip(task.classes, found.tolist()) if not ok]
            if missing:
                warnings.warn(
                    f"{task.dataset}: no few-shot box for {missing}; their queries use the class name", stacklevel=3
                )
            queries = torch.where(found[:, None], image_queries.to(queries.dtype), queries)
        return queries

    def _text_embeddings(self, texts: list[str]) -> torch.Tensor:
        max_length = self.model.config.text_config.max_position_embeddings
        tokens = self.processor.tokenizer(
            texts, padding="max_length", truncation=True, max_length=max_length, return_tensors="pt"
        )
        output = self.model.base_model.get_text_features(
            input_ids=tokens["input_ids"].to(self.torch_device),
            attention_mask=tokens["attention_mask"].to(self.torch_device),
        )
        return output.pooler_output

    def _image_tower(self, images: list[Image.Image]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per patch: image features ``(B, P, D)``, class embeddings and normalised
        ``cxcywh`` boxes in the processed (square) frame."""
        pixels = self.processor.image_processor(images=images, return_tensors="pt")["pixel_values"]
        feature_map = self.model.image_embedder(pixel_values=self.to_model(pixels))[0]
        batch, height, width, dim = feature_map.shape
        features = feature_map.reshape(batch, height * width, dim)
        _, class_embeds = self.model.class_predictor(features)
        return features, class_embeds, self.model.box_predictor(features, feature_map)

    def _pixel_boxes(
        self, logits: torch.Tensor, boxes: torch.Tensor, images: list[Image.Image], threshold: float
    ) -> list[dict]:
        """The processor's post-processing: best class per box, in pixels of each image."""
        outputs = SimpleNamespace(logits=logits.float(), pred_boxes=boxes.float())
        sizes = [(image.height, image.width) for image in images]
        return self.processor.post_process_grounded_object_detection(
            outputs=outputs, threshold=threshold, target_sizes=sizes
        )

    def _image_queries(
        self, examples: tuple[FewShotExample, ...], num_classes: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean unit class embedding of the predicted box best matching each few-shot box."""
        sums = torch.zeros(num_classes, self.model.config.text_config.hidden_size, device=self.torch_device)
        counts = torch.zeros(num_classes, device=self.torch_device)
        for example in tqdm(examples, desc=f"{self.name}: few-shot queries", disable=not examples):
            if len(example.labels) == 0:
                continue
            _, class_embeds, boxes = self._image_tower([example.image])
            logits = torch.zeros(boxes.shape[:2] + (1,), device=boxes.device)
            (predicted,) = self._pixel_boxes(logits, boxes, [example.image], threshold=-1.0)  # every box, in order
            target = torch.as_tensor(
                np.asarray(example.boxes, dtype=np.float32).reshape(-1, 4), device=self.torch_device
            )
            best = box_iou(target, predicted["boxes"].to(self.torch_device)).argmax(dim=1)
            embeds = torch.nn.functional.normalize(class_embeds[0, best].float(), dim=-1)
            labels = torch.as_tensor(np.asarray(example.labels, dtype=np.int64), device=self.torch_device)
            sums.index_add_(0, labels, embeds)
            counts.index_add_(0, labels, torch.ones_like(labels, dtype=counts.dtype))
        found = counts > 0
        return sums / counts.clamp(min=1)[:, None], found

    def detect(self, images: list[Image.Image]) -> list[Detections]:
        features, _, boxes = self._image_tower(images)
        queries = self.queries.to(features.dtype)[None].expand(len(images), -1, -1)
        logits, _ = self.model.class_predictor(features, queries, None)
        results = self._pixel_boxes(logits, boxes, images, threshold=self.options["score_threshold"])
        out = []
        for result in results:
            keep = batched_nms(result["boxes"], result["scores"], result["labels"], self.options["nms_iou"])
            out.append(to_numpy(result["boxes"][keep], result["scores"][keep], result["labels"][keep]))
        return out


class Owlv2Adapter(OwlAdapter):
    """OWLv2; default checkpoint ``google/owlv2-base-patch16-ensemble`` (960-pixel input)."""

    name = "owlv2"
    default_checkpoint = "google/owlv2-base-patch16-ensemble"
    model_class = Owlv2ForObjectDetection
    config_class = Owlv2Config
    image_processor_class = Owlv2ImageProcessor
    processor_class = Owlv2Processor


class OwlVitAdapter(OwlAdapter):
    """OWL-ViT; default checkpoint ``google/owlvit-base-patch32`` (768-pixel input)."""

    name = "owlvit"
    default_checkpoint = "google/owlvit-base-patch32"
    model_class = OwlViTForObjectDetection
    config_class = OwlViTConfig
    image_processor_class = OwlViTImageProcessor
    processor_class = OwlViTProcessor
