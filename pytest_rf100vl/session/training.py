"""The training stage of a pair (the README's "Data regimes"): a pair with a training plan
(:mod:`pytest_rf100vl.core.training_plan`) fits its model on the plan's split before it is scored.

Its weights live in the results folder under ``trained/``, in a folder keyed by the model's
identity, the dataset's fingerprint, the training split and its parameters, the recipe and
its hyper-parameters, the seed and the versions of what trains (:func:`training_key`): a rerun
loads them instead of fitting again, and a fit cut short resumes from its last epoch. The
model is handed the weights explicitly: it fits them (``Trainable.fit``) or loads a finished
fit's (``Trainable.load_trained``), and the session's wrapper keeps their hash for the answer cache.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rf100vl_hf.provenance import versions
from rf100vl_hf.results.folder import model_folder
from rf100vl_hf.results.schema import TrainingColumns, identity_of
from rf100vl_hf.specs import ModelSpec
from rf100vl_hf.training.store import FitRecord, TrainedStore, TrainingError, key_digest

from pytest_rf100vl.adapters.base import ModelInfo
from pytest_rf100vl.adapters.model import Model
from pytest_rf100vl.core.training_plan import TrainingPlan
from pytest_rf100vl.engine.columns import model_identity
from pytest_rf100vl.engine.guard import adapter_call

if TYPE_CHECKING:
    from pytest_rf100vl.kinds.base import Split, SplitIdentity

TRAINED = "trained"
"""The results folder's subfolder of trained weights."""


@dataclass
class Fitted:
    """A pair's fit: its record, its store, and whether it was fitted now (not loaded)."""

    record: FitRecord
    store: TrainedStore
    fitted: bool


def identity_columns(plan: TrainingPlan | None, split: "Split | SplitIdentity | None") -> TrainingColumns:
    """The training columns that say how the model was fine-tuned, all ``None`` zero-shot, so
    rows written before fine-tuning existed keep their identity."""
    if plan is None or split is None:
        return TrainingColumns()
    return TrainingColumns(
        train_split=plan.split, train_split_parameters=split.split_parameters(plan.split), recipe=plan.recipe.name,
        hyperparameters=json.dumps(plan.recipe.hyperparameters(), sort_keys=True), seed=plan.recipe.seed,
        regime=plan.regime,
    )


RUN_ONLY = ("dtype",)
"""Model identity columns a fit's weights do not depend on: the dtype the model runs in."""


def training_key(info: ModelInfo, split: "Split", plan: TrainingPlan, libraries: tuple[str, ...]) -> dict[str, Any]:
    """Everything a fit's weights depend on (the trained-weights store's key): the model's and
    the training's identity columns (:data:`rf100vl_hf.results.schema.IDENTITY`, so a column added
    there keys the weights too) but :data:`RUN_ONLY`, the dataset and its fingerprint, the regime;
    ``libraries`` are the packages the adapter trains with, whose versions are part of it."""
    model = {name: value for name, value in identity_of(model_identity(info, None)).items() if name not in RUN_ONLY}
    return {
        **model,
        "dataset": split.metadata["name"],
        "dataset_fingerprint": split.metadata.get("fingerprint"),
        **identity_of(identity_columns(plan, split)),
        "regime": plan.regime,
        "versions": versions((*libraries, "rf100vl-hf")),
    }


def store_for(results: Path, spec: ModelSpec, dataset: str, key: dict[str, Any]) -> TrainedStore:
    """The store of the fit ``key`` describes, under the results folder."""
    folder = Path(results) / TRAINED / model_folder(spec.text) / model_folder(dataset) / key_digest(key)
    return TrainedStore(folder, key)


def fit_or_load(model: Model, plan: TrainingPlan, store: TrainedStore, split: "Split") -> Fitted:
    """The pair's trained model: fitted now when the store has no finished fit (resuming one cut
    short), then the store's weights handed to the model (:meth:`Model.use_trained`)."""
    data = split.training_data(plan)
    record = store.record()
    if record is None and data.train.n_boxes == 0:
        raise TrainingError(f"{split.metadata['name']}: the {plan.split} split has no box to learn from "
                            f"({len(data.train)} images without annotations): train on another split")
    fitted = record is None
    if fitted:
        with adapter_call("the adapter's fit"):
            record = model.fit(data, plan.recipe, store)
    with adapter_call("the adapter's load_trained"):
        model.set_task(data.task)  # a closed-set detector's head is made for these classes first
        model.use_trained(store)
    return Fitted(record, store, fitted)


def fit_columns(plan: TrainingPlan | None, split: "Split | None", fit: Fitted | None) -> TrainingColumns:
    """The row's training section: how the model was fine-tuned, and what the fit did."""
    columns = identity_columns(plan, split)
    if fit is None:
        return columns
    record = fit.record
    columns.train_s = record.train_s
    columns.train_epochs = record.epochs
    columns.train_steps = record.steps
    columns.train_images_per_s = record.images_per_s
    columns.train_loss_first = record.first_losses.get("loss")
    columns.train_loss_final = record.losses.get("loss")
    columns.train_losses = json.dumps(record.losses, sort_keys=True)
    columns.train_peak_gpu_memory_mb = record.peak_gpu_memory_mb
    columns.train_resumed_after_epoch = record.resumed_after_epoch
    columns.train_details = json.dumps(record.details, sort_keys=True, default=str) if record.details else None
    columns.weights_sha256 = record.weights_sha256
    columns.weights_reused = not fit.fitted
    return columns
