"""Fine-tuning inside the matrix (the README's "Data regimes"): with ``--rf100vl-train SPLIT``
each RF100-VL pair fits its model on that split first, then scores on the test split.

The plan of a pair (:func:`plan`) is its training split, regime and recipe: the adapter's
default recipe for the regime, or ``--rf100vl-recipe``, with ``--rf100vl-train-option``
overrides and the pair's seed. Its weights live in the results folder under ``trained/``,
in a folder keyed by the model's identity, the dataset's fingerprint, the training split and
its parameters, the recipe and its hyper-parameters, the seed and the versions of what
trains (:func:`training_key`): a rerun loads them instead of fitting again, and a fit cut
short resumes from its last epoch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rf100vl_hf.results.rows import TRAINING_IDENTITY
from rf100vl_hf.training.recipe import Recipe, regime_of

if TYPE_CHECKING:
    import datasets

    from rf100vl_hf.training.store import FitRecord, TrainedStore

    from pytest_rf100vl.adapters.base import Adapter

TRAINED = "trained"
"""The results folder's subfolder of trained weights."""


@dataclass(frozen=True)
class TrainingPlan:
    """How a pair fine-tunes its model before it is scored."""

    split: str
    recipe: Recipe

    @property
    def regime(self) -> str:
        return regime_of(self.split)


def plan(adapter: type["Adapter"], split: str | None, recipe_name: str | None, options: dict[str, str],
         seed: int | None) -> TrainingPlan | None:
    """The pair's training plan (``None``: the model is scored as it comes); ``ValueError`` when
    the adapter cannot be trained, or has no such recipe or hyper-parameter."""
    if split is None:
        return None
    regime = regime_of(split)
    if not adapter.recipes:
        raise ValueError(f"adapter {adapter.name!r} cannot be fine-tuned (it has no recipe)")
    name = recipe_name or adapter.default_recipes.get(regime)
    if name not in adapter.recipes:
        raise ValueError(f"adapter {adapter.name!r} has no recipe {name!r} for the {regime} regime "
                         f"(recipes: {', '.join(adapter.recipes)}; choose one with --rf100vl-recipe)")
    recipe = adapter.recipes[name].with_options(options)
    return TrainingPlan(split, replace(recipe, seed=recipe.seed if seed is None else seed))


def identity_columns(training: TrainingPlan | None, metadata: dict[str, Any]) -> dict[str, Any]:
    """The row's columns that say how the model was fine-tuned (:data:`TRAINING_IDENTITY`), all
    ``None`` zero-shot, so rows written before fine-tuning existed keep their identity."""
    from pytest_rf100vl.kinds.rf100vl.rows import split_parameters

    if training is None:
        return dict.fromkeys(TRAINING_IDENTITY)
    values = (training.split, split_parameters(metadata, training.split, "names"), training.recipe.name,
              json.dumps(training.recipe.hyperparameters(), sort_keys=True), training.recipe.seed)
    return dict(zip(TRAINING_IDENTITY, values))


def training_key(model: dict[str, Any], metadata: dict[str, Any], training: TrainingPlan,
                 libraries: tuple[str, ...]) -> dict[str, Any]:
    """Everything a fit's weights depend on (the trained-weights store's key): ``libraries`` are
    the packages the adapter trains with, whose versions are part of it."""
    return {
        **{key: model.get(key) for key in ("model", "checkpoint", "model_revision", "adapter_options")},
        "dataset": metadata["name"],
        "dataset_fingerprint": metadata.get("fingerprint"),
        **identity_columns(training, metadata),
        "regime": training.regime,
        "versions": _versions((*libraries, "rf100vl-hf")),
    }


def _versions(packages: tuple[str, ...]) -> dict[str, str | None]:
    """The installed versions of ``packages`` (read from metadata: nothing is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def store_for(results: Path, spec: str, dataset: str, key: dict[str, Any]) -> "TrainedStore":
    """The store of the fit ``key`` describes, under the results folder."""
    from rf100vl_hf.training.store import TrainedStore, key_digest

    from rf100vl_hf.results.folder import model_folder

    return TrainedStore(Path(results) / TRAINED / model_folder(spec) / model_folder(dataset) / key_digest(key), key)


def fit_or_load(
    adapter: "Adapter",
    training: TrainingPlan,
    store: "TrainedStore",
    metadata: dict[str, Any],
    load_split: Callable[[str], "datasets.Dataset"],
) -> tuple["FitRecord", bool]:
    """The pair's trained model: its finished fit's weights loaded when the store has them, else
    fitted now (resuming a fit cut short). Returns the fit's record and whether it fitted now."""
    from rf100vl_hf.training.samples import Samples, unlabelled

    from pytest_rf100vl.adapters.base import TrainingData
    from pytest_rf100vl.kinds.rf100vl.tasks import detection_task
    from pytest_rf100vl.engine.guard import adapter_call

    from rf100vl_hf.training.store import TrainingError

    train = load_split(training.split)
    task = detection_task(adapter, train, metadata, training.split, "names", load_split)
    record = store.record()
    if record is None and Samples(train).n_boxes == 0:
        raise TrainingError(f"{metadata['name']}: the {training.split} split has no box to learn from "
                            f"({len(train)} images without annotations): train on another split")
    if record is not None:
        with adapter_call("the adapter's load_trained"):
            adapter.set_task(task)  # a closed-set detector's head is made for these classes first
            adapter.load_trained(store)
        return record, False
    rest = unlabelled(load_split("train"), train) if training.regime == "semi-supervised" else None
    data = TrainingData(split=training.split, train=Samples(train), validation=Samples(load_split("validation")),
                        task=task, unlabelled=Samples(rest) if rest is not None else ())
    with adapter_call("the adapter's fit"):
        record = adapter.fit(data, training.recipe, store)
    return record, True


def fit_columns(record: "FitRecord | None", fitted: bool) -> dict[str, Any]:
    """What a fit did, as row columns (``None`` zero-shot)."""
    if record is None:
        return {"train_s": None, "train_epochs": None, "train_steps": None, "train_images_per_s": None,
                "train_loss_first": None, "train_loss_final": None, "train_losses": None,
                "train_peak_gpu_memory_mb": None, "train_resumed_after_epoch": None, "train_details": None,
                "weights_sha256": None, "weights_reused": None}
    return {
        "train_s": record.train_s,
        "train_epochs": record.epochs,
        "train_steps": record.steps,
        "train_images_per_s": record.images_per_s,
        "train_loss_first": record.first_losses.get("loss"),
        "train_loss_final": record.losses.get("loss"),
        "train_losses": json.dumps(record.losses, sort_keys=True),
        "train_peak_gpu_memory_mb": record.peak_gpu_memory_mb,
        "train_resumed_after_epoch": record.resumed_after_epoch,
        "train_details": json.dumps(record.details, sort_keys=True, default=str) if record.details else None,
        "weights_sha256": record.weights_sha256,
        "weights_reused": not fitted,
    }
