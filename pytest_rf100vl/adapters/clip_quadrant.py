"""``clip-quadrant``: a UOUO baseline that needs no detector and no language model.

A mosaic is four cells (top-left, top-right, bottom-left, bottom-right: halves of the
image, 400 x 400 in an 800 x 800 mosaic). Each cell is cropped and embedded with
open_clip, the target's name is embedded as ``"a photo of a {name}"`` (option
``template``), and the cell most similar to it (cosine) is the answer: its quadrant word,
and the whole cell as the box. It shows how much of UOUO a model gets right by knowing
what the object looks like, without locating it inside the cell.

Checkpoint: ``MODEL@TAG``, an open_clip model name and pretrained tag; default
``ViT-B-32@laion2b_s34b_b79k``, the CLIP that ranks the hard mosaics' neighbours (see
:mod:`rf100vl_hf.uouo.embeddings`). ``hf-hub:ORG/REPO`` and ``local-dir:PATH`` models
carry their weights and take no tag. ``clip-quadrant:tiny`` is a tiny random open_clip
model (registered with ``open_clip.add_model_config``, ``pretrained=None``, seeded).

It answers UOUO only (``tasks``): the plugin leaves it out of RF100-VL pairs, and
:meth:`ClipQuadrantAdapter.predict` raises for RF100-VL detection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image

from rf100vl_hf.metrics.grounding import QUADRANTS
from rf100vl_hf.uouo.embeddings import RANDOM_INIT_SEED

from pytest_rf100vl.adapters.base import (
    TINY,
    Adapter,
    Detections,
    GroundingAnswer,
    GroundingQuery,
    ImageItem,
    tiny_model_dir,
)
from pytest_rf100vl.adapters.hf import build_once, resolve_dtype, torch_device
from pytest_rf100vl.adapters.registry import listed

TINY_MODEL = "rf100vl-tiny-clip"
TINY_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}
"""One 32-wide layer per tower, 32-pixel images; the vocabulary is open_clip's own BPE."""

PRECISIONS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def cells(width: int, height: int) -> list[tuple[float, float, float, float]]:
    """The four cells of an image as ``xyxy`` pixel boxes, in :data:`QUADRANTS` order."""
    half_w, half_h = width / 2, height / 2
    return [
        (0, 0, half_w, half_h),
        (half_w, 0, width, half_h),
        (0, half_h, half_w, height),
        (half_w, half_h, width, height),
    ]


def split_checkpoint(checkpoint: str) -> tuple[str, str | None]:
    """``MODEL@TAG`` -> (model, tag). A bare built-in model name is refused: open_clip would
    build it with random weights and the baseline would silently mean nothing."""
    model, _, tag = checkpoint.partition("@")
    if tag:
        return model, tag
    if model.startswith(("hf-hub:", "local-dir:")):
        return model, None
    import open_clip

    tags = ", ".join(open_clip.list_pretrained_tags_by_model(model)) or "none known"
    raise ValueError(
        f"clip-quadrant checkpoint {checkpoint!r} names no weights: write MODEL@TAG (tags of {model}: {tags})"
    )


def _write_tiny_config(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / f"{TINY_MODEL}.json").write_text(json.dumps(TINY_CONFIG))


def register_tiny() -> str:
    """Register the tiny open_clip config (once per process) and return its model name."""
    import open_clip

    if TINY_MODEL not in open_clip.list_models():
        folder = build_once(tiny_model_dir(ClipQuadrantAdapter.name), _write_tiny_config)
        open_clip.add_model_config(folder / f"{TINY_MODEL}.json")
    return TINY_MODEL


class ClipQuadrantAdapter(Adapter):
    name = "clip-quadrant"
    default_checkpoint, prompt_modes, tasks = listed(name)
    option_defaults: ClassVar[dict[str, Any]] = {"template": "a photo of a {}"}

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        import open_clip

        self.torch_dtype = resolve_dtype(dtype)
        self.torch_device = torch_device(device)
        self.model_name, self.tag = (
            (register_tiny(), None) if self.checkpoint == TINY else split_checkpoint(self.checkpoint)
        )
        from rf100vl_hf.uouo.embeddings import require_weights

        require_weights(self.model_name, self.tag)  # offline: one clear error in seconds, not a minute of retries
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_INIT_SEED)
            model, _, self.preprocess = open_clip.create_model_and_transforms(
                self.model_name, pretrained=self.tag, device=self.torch_device, precision=PRECISIONS[dtype]
            )
        self.model = model.eval()
        self.tokenizer = open_clip.get_tokenizer(self.model_name)

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        """The pretrained tag (or the seeded random init of the tiny model), known from the
        checkpoint alone: the revision it records and the one its rows are reused on."""
        if checkpoint == TINY:
            return f"random-init-seed{RANDOM_INIT_SEED}"
        return (checkpoint or "").partition("@")[2] or None

    @property
    def is_smoke(self) -> bool:
        return self.checkpoint == TINY

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        raise NotImplementedError(
            "clip-quadrant answers UOUO quadrant questions only; it cannot detect RF100-VL objects"
        )

    @torch.inference_mode()
    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        if len(batch) != len(queries):
            raise ValueError(f"{len(batch)} images but {len(queries)} queries")
        if not batch:
            return []
        boxes = [cells(item.image.width, item.image.height) for item in batch]
        crops = [
            item.image.crop(tuple(round(v) for v in box))
            for item, item_cells in zip(batch, boxes)
            for box in item_cells
        ]
        images = self._encode_images(crops).reshape(len(batch), len(QUADRANTS), -1)
        texts = self._encode_texts([self.options["template"].format(query.target) for query in queries])
        similarity = torch.einsum("bqd,bd->bq", images, texts).float().cpu().numpy()
        answers = []
        for cell_boxes, scores in zip(boxes, similarity):
            best = int(np.argmax(scores))
            raw = {"similarity": ", ".join(f"{q}={s:.4f}" for q, s in zip(QUADRANTS, scores))}
            answers.append(GroundingAnswer(tuple(float(v) for v in cell_boxes[best]), QUADRANTS[best], raw))
        return answers

    def _encode_images(self, images: list[Image.Image]) -> torch.Tensor:
        pixels = torch.stack([self.preprocess(image) for image in images]).to(self.torch_device, self.torch_dtype)
        return self.model.encode_image(pixels, normalize=True)

    def _encode_texts(self, texts: list[str]) -> torch.Tensor:
        return self.model.encode_text(self.tokenizer(texts).to(self.torch_device), normalize=True)

    def close(self) -> None:
        del self.model
