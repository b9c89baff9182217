"""RT-DETRv2, a closed-set real-time DETR, for the semi- and fully supervised regimes (and
few-shot fine-tuning as a baseline), trained through transformers' own RT-DETR loss.

Why RT-DETRv2: it is in transformers (Apache-2.0 code and COCO weights, kept up by the
library), it trains with the library's loss (Hungarian matching, varifocal, L1 and GIoU,
denoising queries), its COCO-pretrained R18 checkpoint is small enough for one GPU per
dataset, and it converges in few steps where vanilla DETR does not. LW-DETR, the paper's own
DETR of Table 7, has no public transformers checkpoint the plugin can resolve by name yet;
D-FINE's extra distribution-refinement losses cost more per step for no gain at this size.

A closed-set detector knows only the classes it was trained on: its classification head is
made for the task's classes (re-initialised when the checkpoint has other ones), so before
fine-tuning its scores mean nothing. Recipes:

- ``detr-finetune`` (every regime): AdamW, learning rate 1e-4, batch 8, 50 epochs, gradient
  norm clipped at 0.1; ``federated=true`` masks each image's classification loss to the
  classes annotated in it (:mod:`rf100vl_hf.training.federated`).
- ``stac`` (semi-supervised): a teacher trained on the labelled split labels the rest of
  train, kept above the confidence that maximises its F1 on validation
  (:mod:`rf100vl_hf.training.stac`); a student, from the checkpoint again, trains on both.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from PIL import Image
from transformers import RTDetrImageProcessor, RTDetrResNetConfig, RTDetrV2Config, RTDetrV2ForObjectDetection
from transformers.image_transforms import center_to_corners_format

from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.base import Detections, DetectionTask, TrainingData
from pytest_rf100vl.adapters.hf import image_tensors, read_back
from pytest_rf100vl.adapters.pipelined import PipelinedDetector
from pytest_rf100vl.adapters.registry import listed

if TYPE_CHECKING:
    from rf100vl_hf.training.samples import Sample
    from rf100vl_hf.training.store import FitRecord, TrainedStore

MAX_DETECTIONS = 300


class RTDetrV2Adapter(PipelinedDetector):
    """RT-DETRv2; default checkpoint ``PekingU/rtdetr_v2_r18vd`` (COCO)."""

    name = "rt-detrv2"
    default_checkpoint, prompt_modes, tasks = listed(name)
    model_class: ClassVar[Any] = RTDetrV2ForObjectDetection
    option_defaults: ClassVar[dict[str, Any]] = {"max_detections": MAX_DETECTIONS}
    recipes: ClassVar[dict[str, Recipe]] = {
        "detr-finetune": Recipe("detr-finetune", epochs=50, batch_size=8, learning_rate=1e-4),
        "stac": Recipe("stac", epochs=50, batch_size=8, learning_rate=1e-4, extra={"student_epochs": 50}),
    }
    default_recipes: ClassVar[dict[str, str]] = dict.fromkeys(
        ("few-shot", "semi-supervised", "fully-supervised"), "detr-finetune")
    fresh_head = False
    """Whether the classification head was made for the task (random) rather than loaded."""

    @classmethod
    def build_tiny(cls, folder: Path) -> None:
        """A one-block-per-stage ResNet, a 32-wide encoder and a two-layer decoder with 20
        queries, on 64x64 input: about 0.37 M parameters, trainable in seconds on a CPU."""
        backbone = RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 64], depths=[1, 1, 1, 1],
                                      layer_type="basic", out_features=["stage2", "stage3", "stage4"])
        config = RTDetrV2Config(
            backbone_config=backbone, use_pretrained_backbone=False, num_labels=2, encoder_hidden_dim=32,
            encoder_in_channels=[32, 64, 64], feat_strides=[8, 16, 32], encoder_ffn_dim=64,
            encoder_attention_heads=2, d_model=32, num_queries=20, decoder_in_channels=[32, 32, 32],
            decoder_ffn_dim=64, decoder_layers=2, decoder_attention_heads=2, num_denoising=10,
            decoder_n_points=2, freeze_backbone_batch_norms=False, anchor_image_size=[64, 64],
        )
        cls.model_class(config).save_pretrained(folder)
        RTDetrImageProcessor(size={"height": 64, "width": 64}).save_pretrained(folder)

    def pixel_inputs(self, images: list[Image.Image]) -> dict[str, torch.Tensor]:
        """The image processor's outputs (its checkpoint has no text side: the processor is it)."""
        return self.processor(images=image_tensors(images, self.torch_device), return_tensors="pt",
                              device=self.torch_device)

    def prompt_texts(self, query: Any) -> tuple[str, ...]:
        return ()  # no prompt: the classes (in the key's class list) and the weights say it all

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        if self.model.config.num_labels != len(task.classes):
            self._head_for(task.classes)

    def _head_for(self, classes: list[str]) -> None:
        """The checkpoint with a classification head for ``classes`` (new, random: drawn from a
        fixed seed, so that an untrained head answers the same in every run)."""
        import transformers

        torch.manual_seed(0)
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # the re-initialised head is the point, not news
        try:
            self.model = self.load_model(
                num_labels=len(classes), ignore_mismatched_sizes=True,
                id2label=dict(enumerate(classes)), label2id={name: i for i, name in enumerate(classes)})
        finally:
            transformers.logging.set_verbosity(verbosity)
        self.trained_weights = None
        self.fresh_head = True

    @property
    def is_smoke(self) -> bool:
        """A head made for the task and never trained scores nothing but chance, whatever the checkpoint."""
        return super().is_smoke or (self.fresh_head and self.trained_weights is None)

    def inputs(self, images: list[Image.Image]) -> torch.Tensor:
        return self.to_model(self.pixel_inputs(images)["pixel_values"])

    def outputs(self, pixels: torch.Tensor) -> Any:
        return self.model(pixel_values=pixels)

    def detections(self, outputs: Any, images: list[Image.Image]) -> list[Detections]:
        """The best ``max_detections`` (query, class) pairs of each image by sigmoid score, as
        transformers' RT-DETR post-processing ranks them, with boxes in pixels."""
        probs = outputs.logits.float().sigmoid()
        classes = probs.shape[2]
        count = min(self.options["max_detections"], probs.shape[1] * classes)
        scores, flat = probs.flatten(1).topk(count, dim=1)
        boxes = outputs.pred_boxes.float().gather(1, (flat // classes)[..., None].expand(-1, -1, 4))
        scale = torch.tensor([[image.width, image.height] * 2 for image in images], device=boxes.device)[:, None, :]
        xyxy = center_to_corners_format(boxes) * scale
        return read_back(list(zip(xyxy, scores, flat % classes)))

    # -- fine-tuning --------------------------------------------------------------------
    def fit(self, data: TrainingData, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        if recipe.name == "stac":
            return self._stac(data, recipe, store)
        return self._train(data.train, data.task, recipe, store)

    def _train(self, samples: Any, task: DetectionTask, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        from rf100vl_hf.training.federated import FederatedMask
        from rf100vl_hf.training.loop import train

        self.restore_pretrained()
        self.set_task(task)
        mask = FederatedMask()
        handles = mask.attach(self._class_heads()) if recipe.federated else []

        def step(batch: list["Sample"]) -> Any:
            if recipe.federated:
                mask.set([sample.labels.tolist() for sample in batch], len(task.classes))
            return self.loss(batch)

        try:
            return train(self.model, samples, step, recipe, store, device=str(self.torch_device),
                         description=f"{self.name} on {task.dataset}")
        finally:
            for handle in handles:
                handle.remove()

    def _class_heads(self) -> list[torch.nn.Module]:
        heads = [self.model.model.enc_score_head, *self.model.model.decoder.class_embed]
        return [head for head in heads if isinstance(head, torch.nn.Linear)]

    def loss(self, samples: list["Sample"]) -> Any:
        """transformers' RT-DETR loss of a batch (boxes as ``cxcywh`` fractions of each image)."""
        from rf100vl_hf.training.samples import normalized_targets

        labels = []
        for boxes, classes in (normalized_targets(sample) for sample in samples):
            labels.append({"class_labels": torch.as_tensor(classes, dtype=torch.long, device=self.torch_device),
                           "boxes": torch.as_tensor(boxes, device=self.torch_device)})
        pixels = self.to_model(self.pixel_inputs([sample.image for sample in samples])["pixel_values"])
        outputs = self.model(pixel_values=pixels, labels=labels)
        return SimpleNamespace(loss=outputs.loss, loss_dict=outputs.loss_dict)

    def _stac(self, data: TrainingData, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        from rf100vl_hf.training.stac import stac

        def load(teacher: "TrainedStore") -> None:
            self.restore_pretrained()
            self.set_task(data.task)
            self.load_trained(teacher)

        return stac(data.train, data.validation, data.unlabelled, recipe, store,  # type: ignore[arg-type]
                    train=lambda samples, r, s: self._train(samples, data.task, r, s), load=load,
                    predict=self.detections_of)
