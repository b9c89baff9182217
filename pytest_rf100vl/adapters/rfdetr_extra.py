"""RF-DETR through Roboflow's own ``rfdetr`` package: its model, its ``predict`` and its trainer
(the PyTorch Lightning stack that ``RFDETR.train`` runs, which produced the RF100-VL figures of
Roboflow's rf-detr README), as an optional extra: ``pip install "rf100vl-hf[rfdetr]"``
(Apache-2.0, like rfdetr). Nothing imports ``rfdetr`` unless an ``rfdetr`` model is asked for.

``rfdetr:nano`` (the default), ``small``, ``medium``, ``large``: Roboflow's COCO checkpoints,
which rfdetr downloads itself on first use (into ``$RF_HOME``, default ``~/.roboflow/models``);
``rfdetr:PATH`` a checkpoint rfdetr wrote (``checkpoint_best_total.pth``); ``rfdetr:tiny`` RF-DETR
Nano with random weights at 64 px and 30 queries, built offline. The head is made for the task's
classes as rfdetr makes it for a dataset (the checkpoint's class head resized to the classes and
a background slot), so scores mean nothing until the model is fine-tuned (``--rf100vl-train``).
Answers are rfdetr's: the top ``num_select`` (300) of every query and class slot above ``conf``;
those of the background slot name no class and are left out, as pycocotools leaves out a
category it does not know.

Recipe ``rfdetr``: rfdetr's trainer with Roboflow's documented fine-tuning settings (100 epochs,
batch 4 with gradients accumulated over 4, ``lr`` 1e-4, ``lr_encoder`` 1.5e-4, weight decay 1e-4,
gradients clipped at 0.1, EMA, multi-scale training, bf16 autocast on GPUs that have it) and
everything else rfdetr's own (its augmentations, layer-wise learning-rate decay, schedule). The
split is written on the fly as a Roboflow COCO export in the fit's folder of the trained-weights
store. The weights kept are rfdetr's ``checkpoint_best_total.pth``: of every epoch's regular and
EMA weights, those with the best mAP50:95 on the validation split (rfdetr's own selection,
recorded as ``rfdetr_val_map50_95``); the export and rfdetr's other checkpoints are removed once
the fit is recorded. After each epoch the trainer's whole state goes into the store, and a killed
fit resumes from it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rf100vl_hf.training.recipe import BASIC_FIELDS, Recipe
from rf100vl_hf.training.store import FitRecord, epoch_log, file_sha256

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

SIZES = {"nano": "RFDETRNano", "small": "RFDETRSmall", "medium": "RFDETRMedium", "large": "RFDETRLarge"}
"""Checkpoint words -> rfdetr's classes; each loads Roboflow's COCO checkpoint of that size."""
TINY_CONFIG = {"pretrain_weights": None, "resolution": 64, "num_queries": 30, "num_select": 30, "group_detr": 3}
"""``rfdetr:tiny``: RF-DETR Nano's architecture, random, small enough to train a step on a CPU."""
PRECISION = {"no": None, "fp16": "fp16", "bf16": "bf16"}
"""The recipe's ``mixed_precision`` -> rfdetr's ``amp_dtype`` (on a CPU rfdetr trains in float32)."""


def _import_rfdetr() -> Any:
    """The ``rfdetr`` package, or an error that says how to install it. Importing it sets torch's
    float32 matmul precision for the process; that is put back, so that the other pairs of a run
    compute as they would without it."""
    import torch

    precision = torch.get_float32_matmul_precision()
    try:
        import rfdetr
    except ImportError as error:
        raise ImportError("the rfdetr adapter needs Roboflow's rfdetr package, an optional extra: "
                          "pip install 'rf100vl-hf[rfdetr]'") from error
    finally:
        torch.set_float32_matmul_precision(precision)
    return rfdetr


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """rfdetr's trainer sets torch's float32 matmul precision and PyTorch Lightning's seed variable
    for the process; a fit keeps them to itself."""
    import torch

    precision, seed = torch.get_float32_matmul_precision(), os.environ.get("PL_GLOBAL_SEED")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        if seed is None:
            os.environ.pop("PL_GLOBAL_SEED", None)
        else:
            os.environ["PL_GLOBAL_SEED"] = seed


def write_coco_export(train: Sequence["Sample"], validation: Sequence["Sample"], classes: Sequence[str],
                      folder: Path) -> Path:
    """The training and validation samples as the Roboflow COCO export rfdetr reads (``train/`` and
    ``valid/``, JPEG images beside ``_annotations.coco.json``): category ``i`` is class ``i``, with
    no supercategory, so rfdetr's labels are the task's class indices; zero-area boxes left out."""
    categories = [{"id": i, "name": name, "supercategory": "none"} for i, name in enumerate(classes)]
    for split, samples in (("train", train), ("valid", validation)):
        split_folder = folder / split
        split_folder.mkdir(parents=True, exist_ok=True)
        images, annotations = [], []
        for index in range(len(samples)):
            sample = samples[index]
            name = f"{index:06d}.jpg"
            sample.image.save(split_folder / name, quality=95)
            images.append({"id": index, "file_name": name, "width": sample.image.width, "height": sample.image.height})
            for (x1, y1, x2, y2), label in zip(np.asarray(sample.boxes, dtype=float).reshape(-1, 4), sample.labels):
                if x2 > x1 and y2 > y1:
                    annotations.append({"id": len(annotations) + 1, "image_id": index, "category_id": int(label),
                                        "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1),
                                        "iscrowd": 0})
        data = {"images": images, "annotations": annotations, "categories": categories}
        (split_folder / "_annotations.coco.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def _accelerator(device: str) -> dict[str, Any]:
    """PyTorch Lightning's ``accelerator`` and ``devices`` for a torch device string."""
    kind, _, index = device.partition(":")
    if kind == "cuda":
        return {"accelerator": "gpu", "devices": [int(index)] if index else 1}
    return {"accelerator": kind, "devices": 1}


class RfDetrPackageAdapter(Adapter):
    """RF-DETR through ``rfdetr``; default checkpoint ``nano`` (Roboflow's COCO RF-DETR Nano)."""

    name = "rfdetr"
    default_checkpoint, prompt_modes, tasks = listed(name)
    option_defaults: ClassVar[dict[str, Any]] = {"conf": 0.0, "resolution": 0}
    recipes: ClassVar[dict[str, Recipe]] = {
        "rfdetr": Recipe("rfdetr", epochs=100, batch_size=4, learning_rate=1e-4, weight_decay=1e-4, max_grad_norm=0.1,
                         mixed_precision="bf16", grad_accumulation=4,
                         extra={"lr_encoder": 1.5e-4, "multi_scale": True, "use_ema": True}),
    }
    default_recipes: ClassVar[dict[str, str]] = dict.fromkeys(
        ("few-shot", "semi-supervised", "fully-supervised"), "rfdetr")
    recipe_fields: ClassVar[frozenset[str] | None] = BASIC_FIELDS
    training_libraries: ClassVar[tuple[str, ...]] = ("torch", "transformers", "rfdetr")

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        super().__init__(checkpoint, device, dtype, **options)
        if dtype != "float32":
            raise ValueError(f"the rfdetr adapter predicts in float32 only, not {dtype}: pass --rf100vl-dtype float32")
        if self.checkpoint not in SIZES and self.checkpoint != TINY and not Path(str(self.checkpoint)).is_file():
            raise ValueError(f"rfdetr checkpoint {self.checkpoint!r} is neither a size ({', '.join(SIZES)}), "
                             f"'tiny', nor a checkpoint file")
        self.columns: dict[str, Any] = {}
        self.background = 0  # answers in the background slot, left out
        self.head_classes: list[str] | None = None
        """The classes the current head was made or trained for (``None``: the checkpoint's own)."""
        self.model = self._build()

    def _build(self, num_classes: int | None = None, weights: Path | None = None) -> Any:
        """rfdetr's model for the checkpoint (or finished ``weights``), with a head of ``num_classes``
        when given; random weights are drawn from a fixed seed."""
        import torch

        rfdetr = _import_rfdetr()
        options: dict[str, Any] = {"device": self.device}
        if num_classes is not None:
            options["num_classes"] = num_classes
        if self.options["resolution"]:
            options["resolution"] = self.options["resolution"]
        torch.manual_seed(0)
        if weights is not None or self.checkpoint not in (*SIZES, TINY):
            path = str(weights or self.checkpoint)
            return rfdetr.from_checkpoint(path, trust_checkpoint=weights is not None, **options)
        if self.checkpoint == TINY:
            return rfdetr.RFDETRNano(**{**TINY_CONFIG, **options})
        return getattr(rfdetr, SIZES[str(self.checkpoint)])(**options)

    @property
    def revision(self) -> str | None:
        return self.stored_revision(self.checkpoint)

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        if checkpoint == TINY:
            return "rfdetr:RFDETRNano:" + ",".join(f"{k}={v}" for k, v in TINY_CONFIG.items())
        path = Path(str(checkpoint or cls.default_checkpoint))
        return f"sha256:{file_sha256(path)}" if path.is_file() else None

    @property
    def is_smoke(self) -> bool:
        return self.checkpoint == TINY or (self.head_classes is not None and self.trained_weights is None)

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        return prompt_key(self, query, no_prompt)

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        own = self.model.class_names if self.head_classes is None else self.head_classes
        if list(own) != list(task.classes):
            self.model = self._build(num_classes=len(task.classes))
            self.head_classes = list(task.classes)
            self.trained_weights = None

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        if not batch:
            return []
        assert self.task is not None
        found = self.model.predict([item.image for item in batch], threshold=self.options["conf"],
                                   include_source_image=False)
        out = []
        for detections in found:
            named = detections.class_id < len(self.task.classes)  # the background slot names no class
            self.background += int((~named).sum())
            out.append(Detections(detections.xyxy[named].astype(np.float64),
                                  detections.confidence[named].astype(np.float64),
                                  detections.class_id[named].astype(np.int64)))
        return out

    def answer_counts(self) -> dict[str, int]:
        return {"background_slot": self.background}

    def pair_columns(self) -> dict[str, Any]:
        return dict(self.columns)

    def start_pair(self) -> None:
        self.columns = {}

    # -- fine-tuning --------------------------------------------------------------------
    def fit(self, data: TrainingData, recipe: Recipe, store: "TrainedStore") -> "FitRecord":
        if recipe.federated:
            raise ValueError(f"recipe {recipe.name!r}: rfdetr's loss has no federated form: leave federated at false")
        record = self._train(data.train, data, recipe, store)
        self.set_task(data.task)
        self.columns = {"rfdetr_val_map50_95": record.details["rfdetr_val_map50_95"]}
        return record

    def _train(self, samples: Sequence["Sample"], data: TrainingData, recipe: Recipe,
               store: "TrainedStore") -> "FitRecord":
        """One rfdetr fit on ``samples`` (validation: ``data.validation``) into ``store``, resumed from
        the store's last epoch when there is one."""

        _import_rfdetr()
        from rfdetr.training import RFDETRDataModule, RFDETRModelModule, build_trainer

        folder = store.folder / "rfdetr"
        run = folder / "run"
        latest = store.latest_epoch()
        if latest is None:
            shutil.rmtree(folder, ignore_errors=True)
            write_coco_export(samples, data.validation, data.task.classes, folder / "data")
            resume = None
        else:  # PyTorch Lightning resumes from the trainer's whole state, which the store kept
            run.mkdir(parents=True, exist_ok=True)
            resume = run / "resume.ckpt"
            shutil.copyfile(latest[1], resume)
        self.model = self._build(num_classes=len(data.task.classes))
        config = self.model.get_train_config(
            dataset_dir=str(folder / "data"), output_dir=str(run), resume=str(resume) if resume else None,
            epochs=recipe.epochs, batch_size=recipe.batch_size, grad_accum_steps=recipe.grad_accumulation,
            lr=recipe.learning_rate, lr_encoder=recipe.extra["lr_encoder"], weight_decay=recipe.weight_decay,
            clip_max_norm=recipe.max_grad_norm or 0.0, amp_dtype=PRECISION[recipe.mixed_precision],
            multi_scale=recipe.extra["multi_scale"], use_ema=recipe.extra["use_ema"], seed=recipe.seed,
            class_names=list(data.task.classes), num_workers=0, progress_bar=None, tensorboard=False)
        self.model.model_config.model_name = type(self.model).__name__  # what rfdetr's own train() records
        started = time.perf_counter()
        with _process_state_kept():
            module = RFDETRModelModule(self.model.model_config, config)
            trainer = build_trainer(config, self.model.model_config, **_accelerator(self.device))
            trainer.callbacks.append(epoch_keeper()(store))
            trainer.fit(module, RFDETRDataModule(self.model.model_config, config), ckpt_path=config.resume)
        elapsed = time.perf_counter() - started
        with store.atomic(store.weights.name) as path:
            shutil.copyfile(run / "checkpoint_best_total.pth", path)
        self.load_trained(store)
        history = _history(run / "metrics.csv")
        batches = math.ceil(len(samples) / recipe.batch_size)
        record = store.finish(FitRecord(
            epochs=recipe.epochs, steps=recipe.epochs * batches, train_s=elapsed, images=recipe.epochs * len(samples),
            losses=history[-1] if history else {}, first_losses=history[0] if history else {},
            history=history, resumed_after_epoch=latest[0] if latest else None,
            details={"rfdetr_val_map50_95": _best_validation_map(run / "metrics.csv")},
        ))
        shutil.rmtree(folder)  # the export and rfdetr's own checkpoints (several times the weights' size)
        return record

    def load_trained(self, store: "TrainedStore") -> None:
        self.model = self._build(weights=store.weights)
        self.head_classes = list(self.model.class_names)  # the fit's classes, which rfdetr keeps with the weights
        record = store.record()
        self.trained_weights = record.weights_sha256 if record else None
        self.columns = {"rfdetr_val_map50_95": (record.details if record else {}).get("rfdetr_val_map50_95")}


@functools.cache
def epoch_keeper() -> type:
    """A PyTorch Lightning callback that writes the trainer's whole state into the store after
    each epoch (its validation included), atomically, so a killed fit resumes from it."""
    from pytorch_lightning import Callback

    class EpochKeeper(Callback):
        def __init__(self, store: "TrainedStore") -> None:
            self.store = store

        def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
            with self.store.epoch_checkpoint(trainer.current_epoch + 1) as path:
                trainer.save_checkpoint(path)

    return EpochKeeper


def _history(path: Path) -> list[dict[str, float]]:
    """Each epoch's mean training losses (``loss``: the total rfdetr optimises)."""
    return [{key.removeprefix("train/"): value for key, value in row.items() if key.startswith("train/loss")}
            for row in epoch_log(path) if "train/loss" in row]


def _best_validation_map(path: Path) -> float | None:
    """The best mAP50:95 on validation of any epoch's regular or EMA weights, in percent: the
    weights rfdetr keeps as ``checkpoint_best_total.pth``."""
    values = [row[key] for row in epoch_log(path) for key in ("val/mAP_50_95", "val/ema_mAP_50_95") if key in row]
    return 100 * max(values) if values else None
