"""SAM 3 (Segment Anything 3) as an open-vocabulary detector: its detector finds every instance
of a concept given as a short noun phrase, visual exemplars (boxes), or both, each instance
with a box, a mask and a score. Only boxes and scores are scored here.

**Prompting.** One prompt per class, as RF100-VL's SAM 3 baseline prompts it (each class name on
its own). A prompt is a sequence of 256-wide tokens that the image's features attend to: the
class name's text tokens (its CLIP text encoder, 32 tokens), and in ``fewshot`` mode the
exemplars' tokens after them. The tokens are made once per dataset in :meth:`Sam3Adapter.set_task`;
per batch, the vision encoder (the bulk of the model) runs once per image and its features are
reused by every class's prompt (``Sam3Model.forward(vision_embeds=...)``): the DETR encoder and
decoder then run once per (image, class) pair, batched, at most ``prompts_per_forward`` pairs
per call. SAM 3's mask decoder does not feed its boxes or scores, so the adapter's model runs
without it (:class:`_NoMasks`): at full size it is about a third of each pair's work (on a CPU,
13.8 s of 42.8 s for two pairs, against 19.1 s for the DETR encoder and 9.8 s for the decoder).

**Boxes and scores** go through the processor's documented post-processing for boxes,
``post_process_object_detection`` (score = the query's sigmoid times the prompt's presence
sigmoid, boxes scaled to each image's width and height), on float32 copies of the outputs so that
bfloat16 runs do not round scores into ties. Options:

- ``score_threshold`` (0.0): a box is kept when its score exceeds it. 0 keeps every query, as
  SAM 3's own RF100-VL evaluation does (its post-processor keeps all of them: AP rewards the low
  scores). Roboflow's RF100-VL runner for SAM 3, ``benchmark_sam3.py``, exists in two
  published versions, defaulting to 0.5 and to 0.35; ``--rf100vl-protocol rf-scripts`` sets
  0.5, and ``score_threshold=0.35`` runs the other.
- ``max_detections`` (500): each image keeps its best ``max_detections`` boxes over all classes,
  by score. Each prompt gives at most the model's number of queries (200 for ``facebook/sam3``),
  so a single-class image is never cut, and pycocotools counts at most 500 per image and class;
  without a cap a 50-class dataset would carry 10,000 boxes per image.

Rows record both (``score_threshold``, ``max_detections``) as columns of their own.

**Prompt modes.**

- ``names``: the class name as written.
- ``fewshot``: the class name and the few-shot split's boxes of that class as positive visual
  exemplars. SAM 3 takes exemplar boxes on the image it segments: its geometry encoder pools
  that image's features inside each box (RoI align), adds the box's position and label
  embeddings, and cross-attends to that image, giving one token per box plus a CLS token, which
  follow the text tokens in the prompt. Handing the few-shot boxes to each test image instead
  would pool the test image's features at places that mean nothing there. So each exemplar is
  encoded on the image it comes from (the boxes of one class in one few-shot image together, as
  SAM 3 encodes the boxes it is shown on one image), and the tokens are appended to the class's
  prompt for every test image. The DETR encoder reads prompt tokens without changing them, so a
  prompt built this way from boxes on the scored image itself is exactly SAM 3's own
  text-and-boxes prompt (the tests check this); from other images it is SAM 3's mechanism
  applied across images, which SAM 3 was not trained for (its exemplars' position encodings
  still describe where they sat in their own image). A class with no few-shot box keeps its
  text prompt alone (with a warning).
- ``instructions`` is refused: SAM 3 is prompted with short noun phrases (its text encoder reads
  32 tokens and it was trained on noun phrases); annotator instructions are paragraphs of
  description and labelling rules, which SAM 3's authors hand to an MLLM agent on top of it
  rather than to its text encoder.

**No fine-tuning.** transformers' ``Sam3Model`` has no training objective: its forward takes no
labels and returns no loss, and transformers has no SAM 3 loss elsewhere (its loss registry has
none). The project's recipes train through transformers' own loss (RT-DETRv2, Grounding DINO);
SAM 3's (one-to-one and one-to-many Hungarian matching per prompt, a focal classification loss
with the presence head, L1 and GIoU box losses, mask losses; in facebookresearch/sam3) would
have to be written here with no reference to check it against, so ``recipes`` is empty and
``--rf100vl-train`` leaves SAM 3's pairs out.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image
from transformers import (
    Sam3Config,
    Sam3ImageProcessor,
    Sam3Model,
    Sam3Processor,
    Sam3VisionConfig,
    Sam3ViTConfig,
)
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.models.sam3.modeling_sam3 import (
    Sam3ImageSegmentationOutput,
    Sam3MaskDecoderOutput,
    Sam3VisionEncoderOutput,
)

from rf100vl_hf.progress import progress_bar

from pytest_rf100vl.adapters.base import Detections, DetectionTask, FewShotExample, GroundingQuery
from pytest_rf100vl.adapters.hf import pad_elongated, read_back, tiny_clip_tokenizer
from pytest_rf100vl.adapters.owl import fewshot_digest
from pytest_rf100vl.adapters.pipelined import PipelinedDetector
from pytest_rf100vl.adapters.registry import listed

MAX_DETECTIONS = 500


class _NoMasks(torch.nn.Module):
    """Stands in for SAM 3's mask decoder, whose masks no box or score depends on."""

    def forward(self, **_: Any) -> Sam3MaskDecoderOutput:
        return Sam3MaskDecoderOutput(pred_masks=None, semantic_seg=None)


def detection_levels(vision: Sam3VisionEncoderOutput) -> Sam3VisionEncoderOutput:
    """The vision features a prompt's detection reads: ``Sam3Model.forward`` drops the last FPN
    level, gives the (new) last one to the DETR encoder and the rest to the mask decoder alone.
    Keeping only the last two levels spares copying the large ones for every prompt."""
    return Sam3VisionEncoderOutput(
        fpn_hidden_states=tuple(vision.fpn_hidden_states[-2:]),
        fpn_position_encoding=tuple(vision.fpn_position_encoding[-2:]),
    )


def select(vision: Sam3VisionEncoderOutput, index: torch.Tensor) -> Sam3VisionEncoderOutput:
    """The features of the images ``index`` names, one per (image, prompt) pair."""
    return Sam3VisionEncoderOutput(
        fpn_hidden_states=tuple(level[index] for level in vision.fpn_hidden_states),
        fpn_position_encoding=tuple(level[index] for level in vision.fpn_position_encoding),
    )


class Sam3Adapter(PipelinedDetector):
    """SAM 3; default checkpoint ``facebook/sam3``."""

    name = "sam3"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class: ClassVar[Any] = Sam3Model
    option_defaults: ClassVar[dict[str, Any]] = {
        "score_threshold": 0.0, "max_detections": MAX_DETECTIONS, "prompts_per_forward": 64,
    }
    transport_options = frozenset({"prompts_per_forward"})  # how pairs are batched, not what they answer

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        resolved = self.resolved_options(options)
        for option in ("max_detections", "prompts_per_forward"):
            if resolved[option] < 1:
                raise ValueError(f"adapter {self.name!r}: option {option} must be at least 1, not {resolved[option]}")
        super().__init__(checkpoint, device, dtype, **options)
        self.prompts: torch.Tensor | None = None  # (classes, tokens, hidden): each class's prompt
        self.prompt_mask: torch.Tensor | None = None  # (classes, tokens): True where a token is real
        self.exemplars = 0

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A two-layer 32-wide ViT on 112-pixel input (8x8 patches of 14, windows of 4), a
        one-layer CLIP text tower, one-layer geometry and DETR encoders, a two-layer decoder with
        20 queries: about 0.27 M parameters."""
        tokenizer = tiny_clip_tokenizer(32)
        backbone = Sam3ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 image_size=112, patch_size=14, window_size=4, global_attn_indexes=[1],
                                 pretrain_image_size=56)
        narrow = dict(hidden_size=32, num_attention_heads=2, intermediate_size=64)
        config = Sam3Config(
            vision_config=Sam3VisionConfig(backbone_config=backbone, fpn_hidden_size=32,
                                           backbone_feature_sizes=[[32, 32], [16, 16], [8, 8]]),
            text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, projection_dim=32,
                             num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=32,
                             bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id),
            geometry_encoder_config=dict(num_layers=1, **narrow),
            detr_encoder_config=dict(num_layers=1, **narrow),
            detr_decoder_config=dict(num_layers=2, num_queries=20, **narrow),
            mask_decoder_config=dict(hidden_size=32, num_attention_heads=2),
        )
        model = cls.model_class(config)
        # at the default initialisation every reference box sits at the centre and every score near
        # 0.25: spread them, as a trained model's are, so that boxes and rankings mean something
        torch.nn.init.normal_(model.detr_decoder.reference_points.weight, std=1.0)
        torch.nn.init.normal_(model.dot_product_scoring.query_proj.weight, std=1.0)
        model.save_pretrained(folder)
        image_processor = Sam3ImageProcessor(size={"height": 112, "width": 112}, mask_size={"height": 32, "width": 32})
        Sam3Processor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(folder)

    def load_model(self, **overrides: Any) -> Any:
        model = super().load_model(**overrides)
        model.mask_decoder = _NoMasks()
        return model

    # -- prompts --------------------------------------------------------------------------
    def set_task(self, task: DetectionTask) -> None:
        if "instructions" in task.prompt:
            raise ValueError(
                f"adapter {self.name!r} does not support prompt mode {task.prompt!r}: SAM 3 is prompted with "
                f"short noun phrases (its text encoder reads 32 tokens, and it was trained on noun phrases), "
                f"not with annotator instructions; use prompt mode names or fewshot")
        super().set_task(task)
        with torch.inference_mode():
            tokens, mask = self._text_prompts(task.classes)
            self.exemplars = 0
            if task.prompt == "fewshot":
                tokens, mask = self._with_exemplars(tokens, mask, task)
        self.prompts, self.prompt_mask = tokens, mask

    def _text_prompts(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each text's tokens as SAM 3 projects them for its DETR, ``(32, hidden)``, and their mask
        (the processor's tokenisation: padded to 32 tokens; longer names are cut to fit)."""
        length = self.model.config.text_config.max_position_embeddings
        encoded = self.processor.tokenizer(texts, padding="max_length", max_length=length, truncation=True,
                                           return_tensors="pt")
        features = self.model.get_text_features(input_ids=encoded["input_ids"].to(self.torch_device),
                                                attention_mask=encoded["attention_mask"].to(self.torch_device))
        mask = encoded["attention_mask"].to(self.torch_device).bool()
        return features.pooler_output, mask

    def _with_exemplars(
        self, tokens: torch.Tensor, mask: torch.Tensor, task: DetectionTask
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each class's text tokens followed by the geometry tokens of its few-shot boxes, each
        group encoded on its own image (module docstring), padded to one length."""
        parts: list[list[torch.Tensor]] = [[t] for t in tokens]
        masks: list[list[torch.Tensor]] = [[m] for m in mask]
        for example in progress_bar(task.fewshot, desc=f"{self.name}: exemplars", disable=not task.fewshot):
            for label, exemplar in self._exemplar_tokens(example, len(task.classes)).items():
                parts[label].append(exemplar)
                masks[label].append(torch.ones(len(exemplar), dtype=torch.bool, device=self.torch_device))
                self.exemplars += len(exemplar) - 1  # a token per box, and the CLS token
        missing = [name for name, found in zip(task.classes, parts) if len(found) == 1]
        if missing:
            warnings.warn(f"{task.dataset}: no few-shot box for {missing}; their prompts are the name alone",
                          stacklevel=3)
        return _padded([torch.cat(p) for p in parts]), _padded([torch.cat(m) for m in masks])

    def _exemplar_tokens(self, example: FewShotExample, num_classes: int) -> dict[int, torch.Tensor]:
        """Class index -> the geometry encoder's tokens for that class's boxes in ``example``, as
        ``Sam3Model.forward`` computes them for boxes on the image it is given."""
        labels = np.asarray(example.labels, dtype=np.int64).reshape(-1)
        boxes = np.asarray(example.boxes, dtype=np.float64).reshape(-1, 4)
        if len(labels) != len(boxes) or np.any((labels < 0) | (labels >= num_classes)):
            raise ValueError(f"adapter {self.name!r}: a few-shot example has {len(boxes)} boxes and labels "
                             f"{sorted(set(labels.tolist()))}; expected one label in 0..{num_classes - 1} per box")
        present = [int(label) for label in np.unique(labels)]
        if not present:
            return {}
        image = pad_elongated(example.image)
        vision = self.model.get_vision_features(pixel_values=self.inputs([image]))
        levels, positions = vision.fpn_hidden_states[:-1], vision.fpn_position_encoding[:-1]
        found = {}
        for label in present:
            mine = boxes[labels == label]
            normalised = self.processor(original_sizes=[[image.height, image.width]], input_boxes=[mine.tolist()],
                                        return_tensors="pt")["input_boxes"].to(self.torch_device)
            count = normalised.shape[1]
            encoded = self.model.geometry_encoder(
                box_embeddings=normalised.to(self.torch_dtype),
                box_mask=torch.ones(1, count, dtype=torch.bool, device=self.torch_device),
                box_labels=torch.ones(1, count, dtype=torch.long, device=self.torch_device),
                img_feats=levels, img_pos_embeds=positions,
            )
            found[label] = encoded.last_hidden_state[0]
        return found

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        if query is not None:  # answered through predict with the target as the only class
            return (query.target,)
        assert self.task is not None
        texts = tuple(self.task.classes)
        return texts + (fewshot_digest(self.task.fewshot),) if self.task.prompt == "fewshot" else texts

    # -- the three stages -------------------------------------------------------------------
    def inputs(self, images: list[Image.Image]) -> torch.Tensor:
        return self.to_model(self.pixel_inputs(images)["pixel_values"])

    def outputs(self, pixels: torch.Tensor) -> Sam3ImageSegmentationOutput:
        """Every (image, class) pair's query logits ``(pairs, queries)``, ``xyxy`` boxes as fractions
        of the image and presence logit ``(pairs, 1)``, pairs ordered image by image."""
        assert self.prompts is not None and self.prompt_mask is not None
        vision = detection_levels(self.model.get_vision_features(pixel_values=pixels))
        classes = len(self.prompts)
        image_of = torch.arange(len(pixels), device=pixels.device).repeat_interleave(classes)
        class_of = torch.arange(classes, device=pixels.device).repeat(len(pixels))
        chunk = self.options["prompts_per_forward"]
        found = []
        for start in range(0, len(image_of), chunk):
            images, prompts = image_of[start:start + chunk], class_of[start:start + chunk]
            out = self.model(vision_embeds=select(vision, images),
                             text_embeds=BaseModelOutputWithPooling(pooler_output=self.prompts[prompts]),
                             attention_mask=self.prompt_mask[prompts])
            found.append((out.pred_logits, out.pred_boxes, out.presence_logits))
        logits, boxes, presence = (torch.cat(parts) for parts in zip(*found))
        return Sam3ImageSegmentationOutput(pred_logits=logits, pred_boxes=boxes, presence_logits=presence)

    def detections(self, outputs: Sam3ImageSegmentationOutput, images: list[Image.Image]) -> list[Detections]:
        """The processor's post-processing of every pair, then each image's classes together, capped."""
        assert self.prompts is not None
        classes = len(self.prompts)
        as_float = Sam3ImageSegmentationOutput(pred_logits=outputs.pred_logits.float(),
                                               pred_boxes=outputs.pred_boxes.float(),
                                               presence_logits=outputs.presence_logits.float())
        sizes = [(image.height, image.width) for image in images for _ in range(classes)]
        found = self.processor.post_process_object_detection(as_float, threshold=self.options["score_threshold"],
                                                             target_sizes=sizes)
        kept = []
        for start in range(0, len(found), classes):
            pairs = found[start:start + classes]
            scores = torch.cat([pair["scores"] for pair in pairs])
            boxes = torch.cat([pair["boxes"] for pair in pairs])
            counts = torch.tensor([len(pair["scores"]) for pair in pairs], device=scores.device)
            labels = torch.arange(classes, device=scores.device).repeat_interleave(counts)
            keep = self._best(scores)
            kept.append((boxes[keep], scores[keep], labels[keep]))
        return read_back(kept)

    def _best(self, scores: torch.Tensor) -> torch.Tensor | slice:
        """The ``max_detections`` best of one image's scores, in their order (all when fewer);
        equal scores keep the earlier box, as pycocotools' stable sort would rank them."""
        cap = self.options["max_detections"]
        if len(scores) <= cap:
            return slice(None)
        return torch.sort(scores, descending=True, stable=True).indices[:cap].sort().values

    # -- the row ----------------------------------------------------------------------------
    def pair_columns(self) -> dict[str, Any]:
        """The score threshold and per-image cap the pair ran with, and in ``fewshot`` mode how
        many exemplar boxes its prompts hold."""
        fewshot = self.task is not None and self.task.prompt == "fewshot"
        return {"score_threshold": self.options["score_threshold"], "max_detections": self.options["max_detections"],
                "fewshot_exemplars": self.exemplars if fewshot else None}


def _padded(rows: Sequence[torch.Tensor]) -> torch.Tensor:
    """Rows of different lengths stacked, zero-padded at the end (``False`` for a mask)."""
    return torch.nn.utils.rnn.pad_sequence(list(rows), batch_first=True)
