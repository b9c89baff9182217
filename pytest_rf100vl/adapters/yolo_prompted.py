"""YOLO-E and YOLO-World through ultralytics (the ``yolo`` extra, AGPL-3.0): open-vocabulary
YOLOs that detect the classes they are prompted with, the specialist rows of the DetPO
paper's RF20-VL board (``--rf100vl-data-option=reference=detpo``).

- ``yoloe`` (default ``yoloe-11s-seg.pt``; ``yoloe:yoloe-11l-seg.pt``, ``yoloe:yoloe-v8l-seg.pt``,
  ``yoloe:yoloe-26s-seg.pt``...): prompt mode ``names`` embeds each class name with the model's
  text encoder (MobileCLIP, which ultralytics fetches); ``fewshot`` prompts each class with
  visual prompts, the boxes of the few-shot split: the model's visual-prompt embedding of each
  class in each few-shot image that has its boxes, averaged over those images and normalised.
  A class with no few-shot box keeps its text embedding (``text_fallback_classes`` in the row).
- ``yolo-world`` (default ``yolov8s-worldv2.pt``): prompt mode ``names``, the names embedded by
  CLIP as ultralytics does.

``NAME:tiny`` builds the architecture from ultralytics' model YAML (``yoloe-11n.yaml``,
``yolov8n-worldv2.yaml``) with random weights, offline; its text "encoder" is a fixed random
unit vector per name (seeded by the name), so a smoke run needs no download. Options as the
``yolo`` adapter's: ``imgsz`` (640), ``conf`` (0.001), ``iou`` (0.7), ``max_det`` (500), and
``agnostic_nms`` (true, ultralytics' own default for YOLO-E: one NMS over every class).
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_rf100vl.adapters.base import TINY, Adapter, Detections, DetectionTask, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.keyed import prompt_key
from pytest_rf100vl.adapters.prompts import image_hash
from pytest_rf100vl.adapters.registry import listed
from pytest_rf100vl.adapters.yolo import file_revision, ultralytics_class, ultralytics_detections


def name_embeddings(names: list[str], width: int) -> torch.Tensor:
    """The tiny variant's text embeddings: per name, a random unit vector seeded by the name,
    shape ``(1, len(names), width)``."""
    vectors = []
    for name in names:
        seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
        vectors.append(torch.randn(width, generator=torch.Generator().manual_seed(seed)))
    return torch.nn.functional.normalize(torch.stack(vectors), dim=-1)[None]


class PromptedYolo(Adapter):
    """An ultralytics open-vocabulary YOLO: the model class (:attr:`ultralytics_name`), the YAML
    of its tiny variant, and how the task's prompt embeddings are made and set."""

    ultralytics_name: ClassVar[str]
    tiny_yaml: ClassVar[str]
    option_defaults: ClassVar[dict[str, Any]] = {"imgsz": 640, "conf": 0.001, "iou": 0.7, "max_det": 500,
                                                 "agnostic_nms": True}

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        model_class = ultralytics_class(self.ultralytics_name)
        with torch.random.fork_rng():  # the tiny variant's random weights are the same in every run
            torch.manual_seed(0)
            self.model = model_class(self.tiny_yaml if self.is_smoke else str(self.checkpoint))
        self.columns: dict[str, Any] = {}

    @property
    def is_smoke(self) -> bool:
        return self.checkpoint == TINY

    @property
    def revision(self) -> str | None:
        return file_revision(self.checkpoint, {TINY: self.tiny_yaml})

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        return file_revision(checkpoint or cls.default_checkpoint, {TINY: cls.tiny_yaml})

    def text_embeddings(self, names: list[str]) -> torch.Tensor:
        """The names' embeddings, ``(1, len(names), width)``: the model's text encoder, or the
        tiny variant's seeded vectors."""
        return name_embeddings(names, self.embedding_width) if self.is_smoke else self.encode_text(names)

    @property
    @abstractmethod
    def embedding_width(self) -> int:
        """The width of the model's prompt embeddings."""

    @abstractmethod
    def encode_text(self, names: list[str]) -> torch.Tensor:
        """The names embedded by the model's own text encoder (which ultralytics fetches)."""

    @abstractmethod
    def use_embeddings(self, names: list[str], embeddings: torch.Tensor) -> None:
        """Make the model detect ``names``, prompted by ``embeddings``."""

    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        """What the answers depend on besides the classes: the few-shot images and boxes in ``fewshot`` mode."""
        task = self.task
        if task is None or task.prompt != "fewshot":
            return ()
        return tuple(f"{image_hash(example.image)}:{np.asarray(example.boxes).round(3).tolist()}:"
                     f"{np.asarray(example.labels).tolist()}" for example in task.fewshot)

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return prompt_key(self, query, self.prompt_texts)

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        embeddings, self.columns = self.task_embeddings(task)
        self.use_embeddings(list(task.classes), embeddings)

    def task_embeddings(self, task: DetectionTask) -> tuple[torch.Tensor, dict[str, Any]]:
        """The prompt embeddings of the task's classes, and the row columns they add: the names'."""
        return self.text_embeddings(list(task.classes)), {}

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        if not batch:
            return []
        results = self.model.predict([item.image for item in batch], imgsz=self.options["imgsz"],
                                     conf=self.options["conf"], iou=self.options["iou"],
                                     max_det=self.options["max_det"], agnostic_nms=self.options["agnostic_nms"],
                                     device=self.device, verbose=False)
        return ultralytics_detections(results)

    def start_pair(self) -> None:
        self.columns = {}

    def pair_columns(self) -> dict[str, Any]:
        return dict(self.columns)


class YoloEAdapter(PromptedYolo):
    """YOLO-E: text prompts, or visual prompts from the few-shot boxes."""

    name = "yoloe"
    default_checkpoint, prompt_modes, tasks = listed(name)
    ultralytics_name = "YOLOE"
    tiny_yaml = "yoloe-11n.yaml"

    @property
    def embedding_width(self) -> int:
        return int(self.model.model.model[-1].embed)

    def encode_text(self, names: list[str]) -> torch.Tensor:
        return self.model.get_text_pe(names)

    def use_embeddings(self, names: list[str], embeddings: torch.Tensor) -> None:
        self.model.set_classes(names, embeddings)

    def task_embeddings(self, task: DetectionTask) -> tuple[torch.Tensor, dict[str, Any]]:
        """In ``fewshot`` mode, each class that has few-shot boxes prompted by its visual
        embedding instead of its name's (``text_fallback_classes``: how many kept the name's)."""
        text, _ = super().task_embeddings(task)
        if task.prompt != "fewshot":
            return text, {}
        from ultralytics.models.yolo.yoloe import YOLOEVPDetectPredictor, YOLOEVPSegPredictor

        predictor_class = YOLOEVPSegPredictor if self.model.task == "segment" else YOLOEVPDetectPredictor
        sums = torch.zeros_like(text[0])
        counts = torch.zeros(len(task.classes))
        for example in task.fewshot:
            labels = np.asarray(example.labels, dtype=np.int64).reshape(-1)
            if not len(labels):
                continue
            present = sorted(set(labels.tolist()))  # the predictor numbers an image's prompt classes 0..k-1
            predictor = predictor_class(overrides={"task": self.model.task, "mode": "predict", "save": False,
                                                   "batch": 1, "imgsz": self.options["imgsz"], "device": self.device,
                                                   "verbose": False})
            predictor.set_prompts({"bboxes": np.asarray(example.boxes, dtype=np.float32).reshape(-1, 4),
                                   "cls": np.array([present.index(label) for label in labels])})
            predictor.setup_model(model=self.model.model, verbose=False)
            embedded = predictor.get_vpe(example.image)[0].detach().to(sums.device, sums.dtype)
            for local, label in enumerate(present):
                sums[label] += embedded[local]
                counts[label] += 1
        seen = counts > 0
        prompts = text[0].clone()
        prompts[seen] = torch.nn.functional.normalize(sums[seen] / counts[seen, None], dim=-1)
        return prompts[None], {"text_fallback_classes": int((~seen).sum())}


class YoloWorldAdapter(PromptedYolo):
    """YOLO-World: text prompts (the class names), embedded by CLIP."""

    name = "yolo-world"
    default_checkpoint, prompt_modes, tasks = listed(name)
    ultralytics_name = "YOLOWorld"
    tiny_yaml = "yolov8n-worldv2.yaml"

    @property
    def embedding_width(self) -> int:
        return int(self.model.model.txt_feats.shape[-1])

    def encode_text(self, names: list[str]) -> torch.Tensor:
        return self.model.model.get_text_pe(names, cache_clip_model=True)

    def use_embeddings(self, names: list[str], embeddings: torch.Tensor) -> None:
        """As ultralytics' ``set_classes`` does once it has the names' CLIP features."""
        self.model.model.txt_feats = embeddings
        self.model.model.model[-1].nc = len(names)
        self.model.model.names = list(names)
        self.model.predictor = None
