"""OmDet-Turbo: the class names are its label list, encoded one by one, and its task
prompt (the processor's own ``"Detect c1, c2, ...."``) conditions the decoder.

Boxes go through the processor's post-processing (score threshold, class-wise NMS, clip)
with the original image sizes. A query whose box or class logits are not finite is given
score 0 first, so that it is filtered out instead of stopping the processor's clipping
assertion. Options: ``score_threshold`` (0.01; the processor's default of 0.3 is for
display, AP rewards low thresholds), ``nms_iou`` (0.5) and ``class_nms`` (true; false: the
processor suppresses nothing, an IoU threshold no overlap exceeds: the ``rf-scripts``
protocol).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import torch
from PIL import Image
from transformers import (
    CLIPTextConfig,
    DetrImageProcessor,
    OmDetTurboConfig,
    OmDetTurboForObjectDetection,
    OmDetTurboProcessor,
)

from pytest_rf100vl.adapters.base import Detections, DetectionTask, GroundingQuery
from pytest_rf100vl.adapters.hf import read_back, tiny_clip_tokenizer
from pytest_rf100vl.adapters.pipelined import PipelinedDetector
from pytest_rf100vl.adapters.registry import listed


class OmDetTurboAdapter(PipelinedDetector):
    """OmDet-Turbo; default checkpoint ``omlab/omdet-turbo-swin-tiny-hf``."""

    name = "omdet-turbo"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = OmDetTurboForObjectDetection
    option_defaults: ClassVar[dict[str, Any]] = {"score_threshold": 0.01, "nms_iou": 0.5, "class_nms": True}

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """The real timm Swin-T backbone, randomly initialised (``pretrained`` is off, so
        nothing is downloaded), on 32-pixel input; a one-layer CLIP text tower; narrow
        encoder and a two-layer decoder with 20 queries."""
        tokenizer = tiny_clip_tokenizer(77)
        config = OmDetTurboConfig(
            text_config=CLIPTextConfig(
                vocab_size=len(tokenizer),
                hidden_size=64,
                intermediate_size=64,
                num_hidden_layers=1,
                num_attention_heads=2,
                max_position_embeddings=77,
                bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            ),
            image_size=32,
            text_projection_in_dim=64,
            text_projection_out_dim=64,
            class_embed_dim=64,  # must differ from decoder_hidden_dim, as in the real model
            task_encoder_hidden_dim=32,
            vision_features_channels=[32, 32, 32],
            encoder_hidden_dim=32,
            encoder_dim_feedforward=32,
            encoder_attention_heads=2,
            decoder_hidden_dim=32,
            decoder_num_heads=2,
            decoder_num_layers=2,
            decoder_dim_feedforward=32,
            decoder_num_points=2,
            num_queries=20,  # at most the 4x4 + 2x2 + 1x1 encoder positions of a 32-pixel image
        )
        OmDetTurboForObjectDetection(config).save_pretrained(folder)
        image_processor = DetrImageProcessor(size={"height": 32, "width": 32})
        OmDetTurboProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        """The label list (the processor derives the task prompt from it)."""
        if query is not None:
            return (query.target,)
        assert self.task is not None
        return tuple(self.task.classes)

    def set_task(self, task: DetectionTask) -> None:
        """Encode the label list and task prompt once, as the processor does for each image."""
        super().set_task(task)
        encoding = self.processor(images=[torch.zeros(3, 1, 1, dtype=torch.uint8)], text=[list(task.classes)],
                                  return_tensors="pt")
        self.text = {key: value.to(self.torch_device) for key, value in encoding.items()
                     if key.startswith(("tasks_", "classes_")) and key != "classes_structure"}

    def inputs(self, images: list[Image.Image]) -> dict[str, torch.Tensor]:
        """The processor's pixels (resized and normalised on the device) and the task's text
        encoding repeated for each image, as the processor would give a batch of them."""
        assert self.task is not None
        pixels = self.to_model(self.pixel_inputs(images)["pixel_values"])
        text = {key: value.repeat(len(images), 1) for key, value in self.text.items()}
        structure = torch.full((len(images),), len(self.task.classes), dtype=torch.long, device=self.torch_device)
        return {"pixel_values": pixels, **text, "classes_structure": structure}

    def outputs(self, inputs: dict[str, torch.Tensor]) -> Any:
        return self.model(**inputs)

    def detections(self, outputs: Any, images: list[Image.Image]) -> list[Detections]:
        coords, logits = outputs.decoder_coord_logits.float(), outputs.decoder_class_logits.float()
        broken = ~torch.isfinite(coords).all(dim=-1)
        outputs.decoder_coord_logits = coords.nan_to_num(0.0, 0.0, 0.0)
        outputs.decoder_class_logits = logits.nan_to_num(float("-inf")).masked_fill(broken[..., None], float("-inf"))
        results = self.processor.post_process_grounded_object_detection(
            outputs,
            threshold=self.options["score_threshold"],
            nms_threshold=self.options["nms_iou"] if self.options["class_nms"] else math.inf,
            target_sizes=[(image.height, image.width) for image in images],
        )
        return read_back([(r["boxes"], r["scores"], r["labels"]) for r in results])
