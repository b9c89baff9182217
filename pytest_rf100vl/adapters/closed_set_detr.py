"""What the closed-set DETRs in transformers share (RT-DETRv2, D-FINE, DEIMv2, LW-DETR, RF-DETR):
inference as three pipelined stages, a classification head made for the task's classes, and
fine-tuning through the model's own transformers loss in the plain torch loop
(:mod:`rf100vl_hf.training.loop`), with the federated loss, STAC, a backbone learning rate, a
weight average and augmentation as a recipe asks (README, "Data regimes").

A closed-set detector knows only the classes it was trained on: when the checkpoint's head has
another number of classes than the task, it is replaced by a new, random one (drawn from a fixed
seed, so an untrained head answers the same in every run) and the pair is a smoke run until the
head is trained. Its scores are each (query, class) pair's sigmoid, the best ``max_detections``
(300, every query's best class and more) kept per image, as transformers' own
``post_process_object_detection`` of each model ranks them; boxes come back in pixels of each
image, whatever its shape.

A subclass names its transformers class and the first transformers version that has it (an older
library is an error saying what to install, when the adapter is built), its classification
heads (the modules whose outputs the federated mask covers: every head whose logits reach the
loss or the query selection), its backbone (the parameter names ``backbone_learning_rate``
applies to), its size divisor (what a multi-scale side must be a multiple of), its recipes and
its tiny model.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from PIL import Image
from transformers.image_transforms import center_to_corners_format

from rf100vl_hf.training.federated import FILL
from rf100vl_hf.training.recipe import Recipe

from pytest_rf100vl.adapters.base import Detections, DetectionTask, TrainingData
from pytest_rf100vl.adapters.hf import image_tensors, read_back, transformers_class
from pytest_rf100vl.adapters.pipelined import PipelinedDetector

if TYPE_CHECKING:
    from rf100vl_hf.training.samples import Sample
    from rf100vl_hf.training.store import FitRecord, TrainedStore

MAX_DETECTIONS = 300
REGIMES = ("few-shot", "semi-supervised", "fully-supervised")


def finetune_recipes(**hyperparameters: Any) -> dict[str, Recipe]:
    """``detr-finetune`` with these hyper-parameters, and ``stac`` with the same for the teacher
    and for the student (``student_epochs``: as many epochs as the teacher)."""
    return {
        "detr-finetune": Recipe("detr-finetune", **hyperparameters),
        "stac": Recipe("stac", **hyperparameters, extra={"student_epochs": hyperparameters["epochs"]}),
    }


def square_side(size: Any) -> int | None:
    """The side of an image processor's ``size`` when it resizes to a fixed square, else ``None``."""
    read = size.get if isinstance(size, dict) else lambda key: getattr(size, key, None)
    height, width = read("height"), read("width")
    return int(height) if height and height == width else None


class ClosedSetDetr(PipelinedDetector):
    """A closed-set transformers DETR (see the module docstring)."""

    architecture: ClassVar[str]
    """The transformers class, e.g. ``RfDetrForObjectDetection``."""
    since: ClassVar[str]
    """The first transformers version that has :attr:`architecture`."""
    class_heads: ClassVar[tuple[str, ...]]
    """Submodule paths of the classification heads (a ``ModuleList`` counts for each of its heads)."""
    backbone: ClassVar[tuple[str, ...]] = ()
    """Parameter-name prefixes of the backbone."""
    federated_fill: ClassVar[float] = FILL
    """The logit a masked class gets (:mod:`rf100vl_hf.training.federated`)."""
    option_defaults: ClassVar[dict[str, Any]] = {"max_detections": MAX_DETECTIONS}
    default_recipes: ClassVar[dict[str, str]] = dict.fromkeys(REGIMES, "detr-finetune")
    fresh_head = False
    """Whether the classification head was made for the task (random) rather than loaded."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        self.model_class = self.resolve_class()
        super().__init__(checkpoint, device, dtype, **options)

    @classmethod
    def resolve_class(cls) -> Any:
        """The transformers class, or an ``ImportError`` naming the transformers version that has it."""
        return transformers_class(cls.name, cls.architecture, cls.since)

    # -- inference ------------------------------------------------------------------------
    def pixel_inputs(self, images: list[Image.Image], side: int | None = None) -> dict[str, torch.Tensor]:
        """The image processor's outputs (the checkpoint has no text side: the processor is it),
        resized to ``side`` x ``side`` when given instead of the processor's own size."""
        resize = {"size": {"height": side, "width": side}} if side else {}
        return self.processor(images=image_tensors(images, self.torch_device), return_tensors="pt",
                              device=self.torch_device, **resize)

    def model_inputs(self, processed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The pixels, and the padding mask where the processor pads a batch."""
        inputs = {"pixel_values": self.to_model(processed["pixel_values"])}
        if "pixel_mask" in processed:
            inputs["pixel_mask"] = processed["pixel_mask"].to(self.torch_device)
        return inputs

    def prompt_texts(self, query: Any) -> tuple[str, ...]:
        return ()  # no prompt: the classes (in the key's class list) and the weights say it all

    def inputs(self, images: list[Image.Image]) -> dict[str, torch.Tensor]:
        return self.model_inputs(self.pixel_inputs(images))

    def outputs(self, inputs: dict[str, torch.Tensor]) -> Any:
        return self.model(**inputs)

    def detections(self, outputs: Any, images: list[Image.Image]) -> list[Detections]:
        """The best ``max_detections`` (query, class) pairs of each image by sigmoid score, as
        transformers' post-processing of these models ranks them, with boxes in pixels."""
        probs = outputs.logits.float().sigmoid()
        classes = probs.shape[2]
        count = min(self.options["max_detections"], probs.shape[1] * classes)
        scores, flat = probs.flatten(1).topk(count, dim=1)
        boxes = outputs.pred_boxes.float().gather(1, (flat // classes)[..., None].expand(-1, -1, 4))
        scale = torch.tensor([[image.width, image.height] * 2 for image in images], device=boxes.device)[:, None, :]
        xyxy = center_to_corners_format(boxes) * scale
        return read_back(list(zip(xyxy, scores, flat % classes)))

    # -- the task's classes -----------------------------------------------------------------
    def restore_pretrained(self) -> None:
        super().restore_pretrained()
        self.fresh_head = False

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

    def class_head_modules(self) -> list[torch.nn.Linear]:
        """The classification heads named by :attr:`class_heads`."""
        found: list[torch.nn.Module] = []
        for path in self.class_heads:
            module = self.model.get_submodule(path)
            found.extend(module if isinstance(module, torch.nn.ModuleList) else [module])
        return [head for head in found if isinstance(head, torch.nn.Linear)]

    # -- fine-tuning ----------------------------------------------------------------------
    @property
    def resolution(self) -> int | None:
        """The square side the processor resizes to (``None``: it keeps the aspect ratio)."""
        return square_side(self.processor.size)

    def size_divisor(self) -> int:
        """What every side of a multi-scale batch must be a multiple of: here the largest
        feature stride; a ViT backbone overrides it with its patch and window grid."""
        return max(self.model.config.feat_strides)

    def fit(self, data: TrainingData, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        if recipe.name == "stac":
            return self._stac(data, recipe, store)
        return self._train(data.train, data.task, recipe, store)

    def _train(self, samples: Any, task: DetectionTask, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        from rf100vl_hf.training.augment import Augmentation
        from rf100vl_hf.training.federated import FederatedMask
        from rf100vl_hf.training.loop import train

        self.restore_pretrained()
        self.set_task(task)
        augmentation = Augmentation.of(recipe, self.resolution, self.size_divisor())
        mask = FederatedMask(self.federated_fill)
        handles = mask.attach(self.class_head_modules()) if recipe.federated else []

        def step(batch: list["Sample"]) -> Any:
            if recipe.federated:
                mask.set([sample.labels.tolist() for sample in batch], len(task.classes))
            return self.loss(batch, side=batch[0].image.width if augmentation.sides else None)

        try:
            return train(self.model, samples, step, recipe, store, device=str(self.torch_device),
                         description=f"{self.name} on {task.dataset}", backbone=self.backbone,
                         augmentation=augmentation)
        finally:
            for handle in handles:
                handle.remove()

    def loss(self, samples: list["Sample"], side: int | None = None) -> Any:
        """transformers' loss of the model on a batch (boxes as ``cxcywh`` fractions of each
        image), the images resized to ``side`` x ``side`` when given."""
        from rf100vl_hf.training.samples import normalized_targets

        labels = []
        for boxes, classes in (normalized_targets(sample) for sample in samples):
            labels.append({"class_labels": torch.as_tensor(classes, dtype=torch.long, device=self.torch_device),
                           "boxes": torch.as_tensor(boxes, device=self.torch_device)})
        inputs = self.model_inputs(self.pixel_inputs([sample.image for sample in samples], side))
        outputs = self.model(**inputs, labels=labels)
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
