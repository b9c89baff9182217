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

Preprocessing runs on the model's device. OWLv2's processor pads each image to a square,
blurs it (anti-aliasing) and resizes it: on a 2048-pixel image its 2-D convolution over the
padded square takes most of a second of CPU. :func:`owlv2_pixel_values` gives the same
pixels (to float rounding) by composing blur and resize into one sparse matrix per axis,
applied to the unpadded image; OWL-ViT's processor is run on the model's device as is.

Boxes go through the processor's own post-processing with the original image size:
OWLv2 pads each image to a square at the bottom or right before resizing, and its
post-processing scales by the longer side; OWL-ViT stretches to a square and scales by
width and height. Options: ``score_threshold`` (0.01), ``nms_iou`` (0.5, IoU above
which a lower-scored box of the same class is suppressed), ``class_nms`` (true; false keeps
every box over the threshold, as Roboflow's OWLv2 script does: the ``rf-scripts`` protocol),
``template``.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import xxhash
from PIL import Image
from torchvision.ops import batched_nms, box_iou
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
from transformers.image_transforms import center_to_corners_format

from rf100vl_hf.progress import progress_bar

from pytest_rf100vl.adapters.base import Detections, DetectionTask, FewShotExample, GroundingQuery
from pytest_rf100vl.adapters.hf import image_tensors, plain_text, read_back, tiny_clip_tokenizer
from pytest_rf100vl.adapters.pipelined import PipelinedDetector
from pytest_rf100vl.adapters.registry import listed

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def instruction_query(name: str, text: str) -> str:
    """The query for a class in ``instructions`` mode (see the module docstring)."""
    sentence = _SENTENCE_END.split(plain_text(text), maxsplit=1)[0].strip()
    if not sentence:
        return ""
    return sentence if name.lower() in sentence.lower() else f"{name}: {sentence}"


def fewshot_digest(examples: tuple[FewShotExample, ...]) -> str:
    """A hash of the few-shot examples' pixels, boxes and labels: what ``fewshot`` queries are made of."""
    hasher = xxhash.xxh3_128()
    for example in examples:
        hasher.update(f"{example.image.mode} {example.image.width}x{example.image.height}".encode())
        hasher.update(example.image.tobytes())
        hasher.update(np.asarray(example.boxes, dtype=np.float64).tobytes())
        hasher.update(np.asarray(example.labels, dtype=np.int64).tobytes())
    return f"fewshot:{hasher.hexdigest()}"


def _reflect(index: np.ndarray, n: int) -> np.ndarray:
    """Indices beyond ``0..n-1`` mirrored back without repeating the edge (torch's ``reflect`` padding)."""
    if n == 1:
        return np.zeros_like(index)
    period = 2 * (n - 1)
    index = np.abs(index) % period
    return np.where(index >= n, period - index, index)


def _blur_taps(sigma: float, size: int) -> np.ndarray:
    """torchvision's 1-D Gaussian kernel of ``size`` taps (``[1.0]`` when there is no blur)."""
    if size == 0:
        return np.ones(1)
    limit = (size - 1) / (2.0 * math.sqrt(2.0))
    weights = np.exp(-((np.linspace(-limit, limit, size) / sigma) ** 2))
    return weights / weights.sum()


@functools.lru_cache(maxsize=32)
def axis_operator(
    extent: int, square: int, out: int, sigma: float, size: int, factor: float, device: torch.device
) -> torch.Tensor:
    """One axis of OWLv2's preprocessing as an ``(out, extent)`` matrix, times ``factor``:
    Gaussian blur (``size`` taps, reflected at the ends of the padded ``square``), then
    bilinear resize from ``square`` to ``out`` (half-pixel centres, no antialiasing),
    restricted to the ``extent`` real pixels (the padding is zeros). Sparse (CSR) on CPU,
    dense elsewhere."""
    scale = np.float32(square) / np.float32(out)  # as torch computes it, in single precision
    source = np.maximum((np.arange(out, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5), 0)
    source = source.astype(np.float64)
    low = np.floor(source).astype(np.int64)
    high = np.where(low < square - 1, low + 1, low)
    taps = _blur_taps(sigma, size) * factor
    offsets = np.arange(len(taps)) - len(taps) // 2
    rows, columns, values = [], [], []
    for base, weight in ((low, 1.0 - (source - low)), (high, source - low)):
        rows.append(np.repeat(np.arange(out), len(taps)))
        columns.append(_reflect(base[:, None] + offsets[None, :], square).ravel())
        values.append((weight[:, None] * taps[None, :]).ravel())
    row, column, value = (np.concatenate(parts) for parts in (rows, columns, values))
    real = column < extent
    cells, where = np.unique(row[real] * extent + column[real], return_inverse=True)  # sorted by row, then column
    summed = np.bincount(where, weights=value[real], minlength=len(cells))
    counts = np.bincount(cells // extent, minlength=out)
    crow = np.concatenate([[0], np.cumsum(counts)])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        matrix = torch.sparse_csr_tensor(
            torch.from_numpy(crow), torch.from_numpy(cells % extent), torch.from_numpy(summed).float(), (out, extent),
            check_invariants=True,
        )
    return matrix if device.type == "cpu" else matrix.to_dense().to(device)


def owlv2_pixel_values(images: list[torch.Tensor], processor: Owlv2ImageProcessor) -> torch.Tensor:
    """``processor(images)["pixel_values"]`` for ``(3, H, W)`` uint8 tensors, computed on
    their device without building the padded square: rescale, pad to a square at the
    bottom and right, blur with sigma ``(square / out - 1) / 2`` and resize bilinearly are
    all linear and act on rows and columns separately, so each axis is one matrix
    (:func:`axis_operator`); then normalise. Images of one size are resized together: two
    matrix products per size, whatever the number of images and channels."""
    out_h, out_w = processor.size.height, processor.size.width
    device = images[0].device
    mean = torch.tensor(processor.image_mean, device=device).view(-1, 1, 1)
    std = torch.tensor(processor.image_std, device=device).view(-1, 1, 1)
    pixels: list[torch.Tensor] = [torch.empty(0)] * len(images)
    by_size: dict[tuple[int, int], list[int]] = {}
    for index, image in enumerate(images):
        by_size.setdefault((image.shape[1], image.shape[2]), []).append(index)
    for (height, width), indices in by_size.items():
        square = max(height, width)
        sigma_h, sigma_w = max((square / out_h - 1) / 2, 0.0), max((square / out_w - 1) / 2, 0.0)
        blur = sigma_h > 0 and sigma_w > 0  # the processor skips the blur unless both axes shrink
        size_h = 2 * math.ceil(3 * sigma_h) + 1 if blur else 0
        size_w = 2 * math.ceil(3 * sigma_w) + 1 if blur else 0
        # the processor hands (height, width) parameters to torchvision's (x, y) arguments:
        # rows are blurred with the width's kernel and columns with the height's
        rows = axis_operator(height, square, out_h, sigma_w, size_w, processor.rescale_factor, device)
        columns = axis_operator(width, square, out_w, sigma_h, size_h, 1.0, device)
        planes = len(indices) * 3  # every channel of every image of this size, side by side
        group = torch.stack([images[i] for i in indices]).float()  # (n, 3, H, W)
        along_rows = rows @ group.permute(2, 0, 1, 3).reshape(height, planes * width)  # (out_h, planes * W), rescaled
        along_rows = along_rows.reshape(out_h, planes, width).permute(2, 1, 0).reshape(width, planes * out_h)
        resized = (columns @ along_rows).reshape(out_w, planes, out_h).permute(1, 2, 0)  # (planes, out_h, out_w)
        normalised = (resized.reshape(len(indices), 3, out_h, out_w) - mean) / std
        for index, image in zip(indices, normalised):
            pixels[index] = image
    return torch.stack(pixels)


def uses_matrix_preprocessing(processor: Any) -> bool:
    """Whether ``processor`` does exactly what :func:`owlv2_pixel_values` reproduces."""
    return (
        isinstance(processor, Owlv2ImageProcessor)
        and processor.do_resize
        and processor.do_pad
        and processor.do_rescale
        and processor.do_normalize
        and bool(processor.size.height and processor.size.width)
    )


class OwlAdapter(PipelinedDetector):
    """The OWL family; subclasses name the architecture's classes."""

    config_class: ClassVar[Any]
    image_processor_class: ClassVar[Any]
    processor_class: ClassVar[Any]
    square_input: ClassVar[bool]
    """Whether the processor pads each image to a square (OWLv2): boxes then scale by the
    longer side, as its post-processing does, rather than by width and height (OWL-ViT)."""
    option_defaults: ClassVar[dict[str, Any]] = {"score_threshold": 0.01, "nms_iou": 0.5, "class_nms": True,
                                                 "template": "a photo of a {}"}

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

    def _texts(self, task: DetectionTask) -> list[str]:
        """The text query of each class: the templated name, or in ``instructions`` mode its
        description's first sentence where it has one."""
        texts = [self.options["template"].format(name) for name in task.classes]
        if task.prompt != "instructions":
            return texts
        described = [instruction_query(name, task.instructions.get(name, "")) for name in task.classes]
        return [d or t for d, t in zip(described, texts)]

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        if query is not None:  # answered through predict with the target as the only class
            return (self.options["template"].format(query.target),)
        assert self.task is not None
        texts = tuple(self._texts(self.task))
        return texts + (fewshot_digest(self.task.fewshot),) if self.task.prompt == "fewshot" else texts

    def _queries(self, task: DetectionTask) -> torch.Tensor:
        """One query embedding per class, ``(classes, dim)``."""
        texts = self._texts(task)
        if task.prompt == "instructions":
            missing = [name for name in task.classes if not instruction_query(name, task.instructions.get(name, ""))]
            if missing:
                warnings.warn(
                    f"{task.dataset}: no description for {missing}; their queries use the class name", stacklevel=3
                )
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

    def pixel_values(self, images: list[Image.Image]) -> torch.Tensor:
        """The processor's ``pixel_values``, computed on the model's device."""
        processor = self.processor.image_processor
        if uses_matrix_preprocessing(processor):
            return owlv2_pixel_values(image_tensors(images, self.torch_device), processor)
        return self.pixel_inputs(images)["pixel_values"]

    def _image_tower(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per patch: image features ``(B, P, D)``, class embeddings and normalised
        ``cxcywh`` boxes in the processed (square) frame."""
        feature_map = self.model.image_embedder(pixel_values=pixels)[0]
        batch, height, width, dim = feature_map.shape
        features = feature_map.reshape(batch, height * width, dim)
        _, class_embeds = self.model.class_predictor(features)
        return features, class_embeds, self.model.box_predictor(features, feature_map)

    def pixel_corners(self, boxes: torch.Tensor, images: list[Image.Image]) -> torch.Tensor:
        """Normalised ``cxcywh`` patch boxes ``(B, P, 4)`` as ``xyxy`` pixels of each image, as
        the processor's post-processing scales them."""
        sizes = [(image.width, image.height) for image in images]
        scale = [[max(w, h)] * 4 if self.square_input else [w, h, w, h] for w, h in sizes]
        return center_to_corners_format(boxes.float()) * torch.tensor(scale, device=boxes.device)[:, None, :]

    def _image_queries(
        self, examples: tuple[FewShotExample, ...], num_classes: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean unit class embedding of the predicted box best matching each few-shot box."""
        sums = torch.zeros(num_classes, self.model.config.text_config.hidden_size, device=self.torch_device)
        counts = torch.zeros(num_classes, device=self.torch_device)
        for example in progress_bar(examples, desc=f"{self.name}: few-shot queries", disable=not examples):
            if len(example.labels) == 0:
                continue
            _, class_embeds, boxes = self._image_tower(self.inputs([example.image]))
            (predicted,) = self.pixel_corners(boxes, [example.image])  # every patch's box, in order
            target = torch.as_tensor(
                np.asarray(example.boxes, dtype=np.float32).reshape(-1, 4), device=self.torch_device
            )
            best = box_iou(target, predicted.to(self.torch_device)).argmax(dim=1)
            embeds = torch.nn.functional.normalize(class_embeds[0, best].float(), dim=-1)
            labels = torch.as_tensor(np.asarray(example.labels, dtype=np.int64), device=self.torch_device)
            sums.index_add_(0, labels, embeds)
            counts.index_add_(0, labels, torch.ones_like(labels, dtype=counts.dtype))
        found = counts > 0
        return sums / counts.clamp(min=1)[:, None], found

    def inputs(self, images: list[Image.Image]) -> torch.Tensor:
        return self.to_model(self.pixel_values(images))

    def outputs(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every patch's class logits ``(B, P, classes)`` and ``cxcywh`` box ``(B, P, 4)``."""
        features, _, boxes = self._image_tower(pixels)
        queries = self.queries.to(features.dtype)[None].expand(len(pixels), -1, -1)
        logits, _ = self.model.class_predictor(features, queries, None)
        return logits, boxes

    def detections(self, outputs: tuple[torch.Tensor, torch.Tensor], images: list[Image.Image]) -> list[Detections]:
        """The processor's post-processing (best class per patch, above ``score_threshold``,
        in pixels), on the whole batch at once, then class-wise NMS per image (unless
        ``class_nms`` is off)."""
        logits, boxes = outputs
        best = logits.float().max(dim=-1)
        scores, labels = best.values.sigmoid(), best.indices
        corners = self.pixel_corners(boxes, images)
        rows, patches = (scores > self.options["score_threshold"]).nonzero(as_tuple=True)
        counts = torch.bincount(rows, minlength=len(images)).tolist()
        kept = []
        for b, s, l in zip(*(t[rows, patches].split(counts) for t in (corners, scores, labels))):
            if not self.options["class_nms"]:
                kept.append((b, s, l))
                continue
            keep = batched_nms(b, s, l, self.options["nms_iou"])
            kept.append((b[keep], s[keep], l[keep]))
        return read_back(kept)


class Owlv2Adapter(OwlAdapter):
    """OWLv2; default checkpoint ``google/owlv2-base-patch16-ensemble`` (960-pixel input)."""

    name = "owlv2"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = Owlv2ForObjectDetection
    config_class = Owlv2Config
    image_processor_class = Owlv2ImageProcessor
    processor_class = Owlv2Processor
    square_input = True


class OwlVitAdapter(OwlAdapter):
    """OWL-ViT; default checkpoint ``google/owlvit-base-patch32`` (768-pixel input)."""

    name = "owlvit"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class = OwlViTForObjectDetection
    config_class = OwlViTConfig
    image_processor_class = OwlViTImageProcessor
    processor_class = OwlViTProcessor
    square_input = False
