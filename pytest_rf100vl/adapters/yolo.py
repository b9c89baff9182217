"""YOLOv8, YOLO11 and YOLO26 through ultralytics (YOLOv8 and YOLO11 are the closed-set
baselines of the RF100-VL paper's Tables 2, 4 and 7), as an optional extra:
``pip install "rf100vl-hf[yolo]"``. Ultralytics is AGPL-3.0, so it is never a default
dependency, and nothing imports it unless a ``yolo`` model is asked for.

``yolo:yolov8n.pt`` (the default), ``yolo:yolo11s.pt``, ``yolo:yolo26m.pt``... load ultralytics'
COCO checkpoints (ultralytics fetches them by name); ``yolo:PATH`` a local one; ``yolo:tiny`` and
``yolo:tiny26`` build YOLOv8n and YOLO26n from their model YAML, offline. Like every closed-set
detector, the head is made for the task's classes (new and random when the checkpoint has
others), so scores mean nothing until the model is fine-tuned (``--rf100vl-train``).

YOLO26 has two heads, trained together: one-to-many (boxes then go through NMS) and one-to-one
(no NMS: the top ``max_det`` of every anchor and class above ``conf``, ``iou`` unused). Option
``end2end`` chooses, in prediction and in ultralytics' own validation alike: false (the default,
as ultralytics 8.4's own) passes ultralytics ``nms=True``, the first; true passes ``nms=False``,
the second.

Recipe ``ultralytics``: ultralytics' own trainer and defaults (its augmentations, optimizer
``auto``, gradients clipped at 10, and gradients accumulated up to a nominal batch of 64 unless
``grad_accumulation`` is set), 100 epochs,
batch 16, ``lr0`` 0.01, weight decay 5e-4. The split is written on the fly as an ultralytics
dataset in the fit's folder of the trained-weights store. After each epoch, ultralytics'
``last.pt`` is copied atomically into the store; a killed fit resumes from it through
ultralytics' own ``resume``. Predictions are scored by the plugin's pycocotools-exact
metric; ultralytics' own mAP50-95 on the validation split is recorded beside it
(``ultralytics_val_map50_95``) to reconcile the two. ``federated=true`` masks each image's
classification loss to the classes annotated in it (a mosaic: its four images' classes).

Recipe ``stac`` (semi-supervised): the same training for a teacher on the labelled split, its
pseudo-labels on the rest of train above the confidence that maximises its F1 on validation,
and a student trained on both (:mod:`rf100vl_hf.training.stac`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from rf100vl_hf.training.recipe import BASIC_FIELDS, Recipe
from rf100vl_hf.training.store import FitRecord, TrainingError, epoch_log, file_sha256

from pytest_rf100vl.adapters.base import (
    TINY,
    Adapter,
    Detections,
    DetectionTask,
    GroundingQuery,
    ImageItem,
    TrainingData,
)
from pytest_rf100vl.adapters.keyed import no_prompt, prompt_key
from pytest_rf100vl.adapters.registry import listed

if TYPE_CHECKING:
    from rf100vl_hf.training.samples import Sample
    from rf100vl_hf.training.store import TrainedStore

TINY26 = "tiny26"
TINY_YAMLS = {TINY: "yolov8n.yaml", TINY26: "yolo26n.yaml"}
"""The checkpoint words that build a model from ultralytics' YAML, offline, with random weights."""
GRADIENT_CLIP = 10.0  # ultralytics' own, fixed
NOMINAL_BATCH = 64  # ultralytics' ``nbs``: gradients accumulate up to it


def file_revision(path: str | None, tiny_yamls: dict[str, str] = TINY_YAMLS) -> str | None:
    """What a checkpoint is: the model YAML an offline word builds, a local file's content hash,
    or ``None`` (a name ultralytics fetches)."""
    if path in tiny_yamls:
        return f"ultralytics:{tiny_yamls[path]}"
    return f"sha256:{file_sha256(Path(path))}" if path and Path(path).is_file() else None


def ultralytics_detections(results: Sequence[Any]) -> list[Detections]:
    """Ultralytics' results of a batch as detections: ``xyxy`` pixels, scores, class indices."""
    return [Detections(r.boxes.xyxy.cpu().numpy().astype(np.float64), r.boxes.conf.cpu().numpy().astype(np.float64),
                       r.boxes.cls.cpu().numpy().astype(np.int64)) for r in results]


def ultralytics_class(name: str = "YOLO") -> type:
    """Ultralytics' model class ``name`` (``YOLO``, ``YOLOE``, ``YOLOWorld``), or an error that
    says how to install it.

    On import, ultralytics patches ``PIL.Image.open`` (an unreadable image then makes it try to
    pip-install a HEIF plugin, and the data's own clear error is lost), ``torch.save`` and numpy's
    print options, for the whole process; they are put back, so that the other pairs of a run
    read, save and print as they would without it."""
    import PIL.Image

    saved = PIL.Image.open, torch.save, np.get_printoptions()
    try:
        import ultralytics
    except ImportError as error:
        raise ImportError(f"{name} needs ultralytics, an optional extra (AGPL-3.0): "
                          "pip install 'rf100vl-hf[yolo]'") from error
    finally:
        PIL.Image.open, torch.save = saved[:2]
        np.set_printoptions(**saved[2])
    return getattr(ultralytics, name)


@contextlib.contextmanager
def _deterministic_state_kept() -> Iterator[None]:
    """Ultralytics' ``deterministic=True`` switches torch to deterministic algorithms for the
    process; a fit keeps that to itself, so the pairs after it run at full speed."""
    import os

    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.backends.cudnn.deterministic, torch.utils.deterministic.fill_uninitialized_memory)
    environment = {name: os.environ.get(name) for name in ("CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED")}
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.backends.cudnn.deterministic, torch.utils.deterministic.fill_uninitialized_memory = saved[2:]
        for name, value in environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def write_dataset(train: Sequence["Sample"], validation: Sequence["Sample"], classes: Sequence[str],
                  folder: Path) -> Path:
    """The training and validation samples as an ultralytics dataset (JPEG images, one label file
    of ``class cx cy w h`` fractions per image; zero-area boxes left out), and its YAML file."""
    from rf100vl_hf.training.samples import normalized_targets

    for split, samples in (("train", train), ("val", validation)):
        image_dir, label_dir = folder / "images" / split, folder / "labels" / split
        image_dir.mkdir(parents=True, exist_ok=True)
        label_dir.mkdir(parents=True, exist_ok=True)
        for index in range(len(samples)):
            sample = samples[index]
            sample.image.save(image_dir / f"{index:06d}.jpg", quality=95)
            boxes, labels = normalized_targets(sample)
            lines = [f"{int(c)} " + " ".join(f"{v:.6f}" for v in box) for box, c in zip(boxes, labels)]
            (label_dir / f"{index:06d}.txt").write_text("\n".join(lines), encoding="utf-8")
    names = "".join(f"  {i}: {json.dumps(name)}\n" for i, name in enumerate(classes))  # JSON strings are YAML
    yaml = folder / "data.yaml"
    yaml.write_text(f"path: {folder.resolve()}\ntrain: images/train\nval: images/val\nnames:\n{names}", encoding="utf-8")
    return yaml


class YoloAdapter(Adapter):
    """YOLO through ultralytics; default checkpoint ``yolov8n.pt`` (COCO)."""

    name = "yolo"
    default_checkpoint, prompt_modes, tasks = listed(name)
    option_defaults: ClassVar[dict[str, Any]] = {"imgsz": 640, "conf": 0.001, "iou": 0.7, "max_det": 500,
                                                 "end2end": False}
    recipes: ClassVar[dict[str, Recipe]] = {
        "ultralytics": Recipe("ultralytics", epochs=100, batch_size=16, learning_rate=0.01, weight_decay=5e-4,
                              max_grad_norm=GRADIENT_CLIP, extra={"optimizer": "auto"}),
        "stac": Recipe("stac", epochs=100, batch_size=16, learning_rate=0.01, weight_decay=5e-4,
                       max_grad_norm=GRADIENT_CLIP, extra={"optimizer": "auto", "student_epochs": 100}),
    }
    default_recipes: ClassVar[dict[str, str]] = dict.fromkeys(
        ("few-shot", "semi-supervised", "fully-supervised"), "ultralytics")
    recipe_fields: ClassVar[frozenset[str] | None] = BASIC_FIELDS
    training_libraries: ClassVar[tuple[str, ...]] = ("torch", "ultralytics")
    fresh_head = False
    """Whether the head was made for the task (random) rather than loaded."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        self.source = TINY_YAMLS.get(str(self.checkpoint), str(self.checkpoint))
        self.restore_pretrained()
        if self.options["end2end"] and getattr(self.model.model.model[-1], "one2one_cv2", None) is None:
            raise ValueError(f"adapter option end2end=true needs a model with a one-to-one head (YOLO26, YOLOv10); "
                             f"{self.checkpoint} has none: leave end2end at false")
        self.columns: dict[str, Any] = {}

    def restore_pretrained(self) -> None:
        self.model = ultralytics_class()(self.source)
        self.fresh_head = False
        self.trained_weights = None

    @property
    def nms(self) -> bool:
        """Ultralytics' ``nms`` setting: ``False`` selects the one-to-one head (no NMS), ``True`` the
        one-to-many head and NMS."""
        return not self.options["end2end"]

    @property
    def revision(self) -> str | None:
        return file_revision(self.checkpoint if self.checkpoint in TINY_YAMLS else self.source)

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        return file_revision(checkpoint or cls.default_checkpoint)

    @property
    def is_smoke(self) -> bool:
        return self.checkpoint in TINY_YAMLS or (self.fresh_head and self.trained_weights is None)

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return prompt_key(self, query, no_prompt)

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        if list(self.model.names.values()) != list(task.classes):
            self._head_for(task.classes)

    def _head_for(self, classes: list[str]) -> None:
        """The architecture with a head for ``classes`` (drawn from a fixed seed) and every other
        layer of the checkpoint, as ultralytics' trainer builds it."""
        import torch
        from ultralytics.nn.tasks import DetectionModel

        torch.manual_seed(0)
        model = DetectionModel(self.model.model.yaml, nc=len(classes), verbose=False)
        model.load(self.model.model, verbose=False)
        model.names = dict(enumerate(classes))
        self.model.model = model
        self.model.predictor = None  # it holds a copy of the model it was set up with, the old head
        self.fresh_head = True

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        if not batch:
            return []
        results = self.model.predict([item.image for item in batch], imgsz=self.options["imgsz"],
                                     conf=self.options["conf"], iou=self.options["iou"],
                                     max_det=self.options["max_det"], nms=self.nms, device=self.device, verbose=False)
        return ultralytics_detections(results)

    def pair_columns(self) -> dict[str, Any]:
        return dict(self.columns)

    def start_pair(self) -> None:
        self.columns = {}

    # -- fine-tuning --------------------------------------------------------------------
    def fit(self, data: TrainingData, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        problems = [message for message, bad in (
            (f"ultralytics clips gradients at {GRADIENT_CLIP:g}: max_grad_norm cannot be "
             f"{recipe.max_grad_norm}", recipe.max_grad_norm != GRADIENT_CLIP),
            ("ultralytics' mixed precision is fp16 only", recipe.mixed_precision == "bf16"),
        ) if bad]
        if problems:
            raise ValueError(f"recipe {recipe.name!r}: " + "; ".join(problems))
        if recipe.name == "stac":
            from rf100vl_hf.training.stac import stac

            record = stac(data.train, data.validation, data.unlabelled, recipe, store,  # type: ignore[arg-type]
                          train=lambda samples, r, s: self._train(samples, data, r, s),
                          load=self.load_trained, predict=self.detections_of)
        else:
            record = self._train(data.train, data, recipe, store)
        self.set_task(data.task)
        self.columns = {"ultralytics_val_map50_95": record.details["ultralytics_val_map50_95"]}
        return record

    def _train(self, samples: Sequence["Sample"], data: TrainingData, recipe: Recipe,
               store: "TrainedStore") -> "FitRecord":
        """One ultralytics fit on ``samples`` (validation: ``data.validation``) into ``store``,
        resumed from the store's last epoch when there is one; ultralytics' mAP on validation
        goes into the record's details."""

        YOLO = ultralytics_class()
        folder = store.folder / "ultralytics"
        run = folder / "run"
        latest = store.latest_epoch()
        yaml = folder / "data" / "data.yaml"
        if latest is None:
            shutil.rmtree(folder, ignore_errors=True)
            yaml = write_dataset(samples, data.validation, data.task.classes, folder / "data")
            self.restore_pretrained()
            model, arguments = self.model, {
                "data": str(yaml), "epochs": recipe.epochs, "batch": recipe.batch_size, "lr0": recipe.learning_rate,
                "weight_decay": recipe.weight_decay, "optimizer": recipe.extra["optimizer"], "seed": recipe.seed,
                "deterministic": True, "imgsz": self.options["imgsz"], "device": self.device, "workers": 0,
                "amp": recipe.mixed_precision == "fp16",
                "nbs": recipe.batch_size * recipe.grad_accumulation if recipe.grad_accumulation > 1 else NOMINAL_BATCH,
                "plots": False, "val": False, "project": str(folder), "name": "run", "exist_ok": True, "verbose": False,
            }
        else:  # ultralytics resumes from its own last.pt, which the store kept whole
            (run / "weights").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(latest[1], run / "weights" / "last.pt")
            model, arguments = YOLO(str(run / "weights" / "last.pt")), {"resume": True}

        def keep_epoch(trainer: Any) -> None:
            with store.epoch_checkpoint(trainer.epoch + 1) as path:
                shutil.copyfile(trainer.last, path)

        model.add_callback("on_model_save", keep_epoch)
        started = time.perf_counter()
        with _deterministic_state_kept():
            model.train(**arguments, trainer=federated_trainer() if recipe.federated else None)
        elapsed = time.perf_counter() - started
        with store.atomic(store.weights.name) as path:
            shutil.copyfile(model.trainer.last, path)
        history = epoch_log(run / "results.csv")
        self.model = YOLO(str(store.weights))
        validation = self.model.val(data=str(yaml), split="val", imgsz=self.options["imgsz"], nms=self.nms,
                                    device=self.device, workers=0, plots=False, verbose=False)
        batches = math.ceil(len(samples) / recipe.batch_size)
        return store.finish(FitRecord(
            epochs=recipe.epochs, steps=recipe.epochs * batches, train_s=max(elapsed, history[-1].get("time", 0.0)),
            images=recipe.epochs * len(samples), losses=_losses(history[-1]), first_losses=_losses(history[0]),
            history=[_losses(row) for row in history], resumed_after_epoch=latest[0] if latest else None,
            details={"ultralytics_val_map50_95": 100 * float(validation.box.map)},
        ))

    def load_trained(self, store: "TrainedStore") -> None:
        self.model = ultralytics_class()(str(store.weights))
        record = store.record()
        self.trained_weights = record.weights_sha256 if record else None
        self.columns = {"ultralytics_val_map50_95": (record.details if record else {}).get("ultralytics_val_map50_95")}


class MaskedBCE(torch.nn.Module):
    """Ultralytics' classification loss (element-wise BCE with logits, ``(images, anchors,
    classes)``) with the federated mask: an image's classes that are not annotated in it add no
    loss and no gradient (:mod:`rf100vl_hf.training.federated`). With no mask, plain BCE."""

    def __init__(self) -> None:
        super().__init__()
        self.mask: torch.Tensor | None = None

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        return loss if self.mask is None else loss * self.mask[:, None, :].to(loss.device, loss.dtype)


def batch_labels(batch_idx: torch.Tensor, classes: torch.Tensor, images: int) -> list[list[int]]:
    """Per image of an ultralytics batch (a mosaic counts its four images' boxes), its classes."""
    out: list[list[int]] = [[] for _ in range(images)]
    for image, cls in zip(batch_idx.view(-1).tolist(), classes.view(-1).tolist()):
        out[int(image)].append(int(cls))
    return out


def detection_losses(criterion: Any) -> list[Any]:
    """The losses inside ultralytics' criterion that score classes: the criterion itself (YOLOv8,
    YOLO11), or each branch of an end-to-end head (YOLO26's one-to-many and one-to-one). A loss
    without the element-wise BCE the federated mask replaces is an error, never an unmasked fit."""

    losses = [getattr(criterion, branch) for branch in ("one2many", "one2one") if hasattr(criterion, branch)]
    losses = losses or [criterion]
    if not all(isinstance(getattr(loss, "bce", None), torch.nn.BCEWithLogitsLoss | MaskedBCE) for loss in losses):
        raise TrainingError(f"federated=true masks ultralytics' classification BCE, which its loss "
                            f"{type(criterion).__name__} does not have (ultralytics {_version()})")
    return losses


def _version() -> str:
    from importlib.metadata import version

    return version("ultralytics")


@functools.cache
def federated_trainer() -> type:
    """Ultralytics' detection trainer whose classification loss is masked per batch to each
    image's annotated classes (the RF100-VL paper's "YOLOv8 w/ federated loss"), in every branch
    of the head that scores classes."""
    from ultralytics.models.yolo.detect import DetectionTrainer
    from ultralytics.utils.torch_utils import unwrap_model

    from rf100vl_hf.training.federated import federated_mask

    class FederatedTrainer(DetectionTrainer):
        def preprocess_batch(self, batch: dict) -> dict:
            batch = super().preprocess_batch(batch)
            model = unwrap_model(self.model)
            if getattr(model, "criterion", None) is None:
                model.criterion = model.init_criterion()
            labels = batch_labels(batch["batch_idx"], batch["cls"], batch["img"].shape[0])
            mask = torch.from_numpy(federated_mask(labels, model.nc))
            for loss in detection_losses(model.criterion):
                if not isinstance(loss.bce, MaskedBCE):
                    loss.bce = MaskedBCE()
                loss.bce.mask = mask
            return batch

    return FederatedTrainer


def _losses(row: dict[str, float]) -> dict[str, float]:
    terms = {key.removeprefix("train/"): value for key, value in row.items() if key.startswith("train/")}
    return {"loss": sum(terms.values()), **terms}
