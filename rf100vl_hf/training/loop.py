"""The one training loop of every recipe: epochs over shuffled batches, AdamW, optional mixed
precision and gradient accumulation, a checkpoint after each epoch, resume from the last.

What a recipe may add is done here once for every model: a learning rate of its own for the
parameters a model names its backbone (two AdamW parameter groups), a linear warm-up of the
learning rates (computed from the step count, so a resumed fit warms up as an uninterrupted
one), an exponential moving
average of the weights (:mod:`rf100vl_hf.training.ema`; the fit's weights are then the
average, as the authors of the real-time DETRs release theirs) and the augmentation of
:mod:`rf100vl_hf.training.augment`, applied to each batch before the model's step sees it.

Each epoch seeds torch from the recipe's seed and the epoch number before it shuffles, so
an epoch does the same thing whether the run went on from the one before or resumed from
its checkpoint: a fit killed in epoch 2 and resumed ends with the weights an uninterrupted
fit has. A loss that is not finite stops the fit with the epoch and step, rather than
training on and scoring garbage.

A checkpoint it cannot resume from (truncated, not one of this loop's, another model's
weights) is set aside with a warning and the fit starts from its first epoch; finished
weights that do not fit the model are an error naming the file (see
:mod:`rf100vl_hf.training.store`).
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rf100vl_hf.progress import logger, progress_bar
from rf100vl_hf.training.augment import Augmentation
from rf100vl_hf.training.ema import WeightAverage, weights_problem
from rf100vl_hf.training.recipe import Recipe
from rf100vl_hf.training.samples import Sample
from rf100vl_hf.training.store import CheckpointWarning, FitRecord, TrainedStore, TrainingError

if TYPE_CHECKING:  # torch is the models extra's: imported where a fit runs, so the base install imports this module
    import torch

Step = Callable[[list[Sample]], Any]
"""A batch of samples -> the model's outputs on them, with their ``loss`` (a scalar tensor) and,
when the model reports them, its terms (``loss_dict``): a recipe's whole forward pass."""


CHECKPOINT_KEYS = ("epoch", "steps", "train_s", "images", "history", "model", "optimizer", "scaler")
"""What an epoch checkpoint of this loop holds (and ``ema``, the weight average, when the recipe keeps one)."""


def _epoch_seed(recipe: Recipe, epoch: int) -> int:
    return recipe.seed * 1_000_003 + epoch


def _loss_terms(outputs: Any) -> dict[str, float]:
    """The total loss and, when the model reports them (transformers' ``loss_dict``), its terms."""
    import torch

    terms = {"loss": float(outputs.loss.detach())}
    for name, value in (getattr(outputs, "loss_dict", None) or {}).items():
        if torch.is_tensor(value) and value.numel() == 1:
            terms[name] = float(value.detach())
    return terms


def _autocast(device: str, precision: str) -> contextlib.AbstractContextManager[Any]:
    if precision == "no":
        return contextlib.nullcontext()
    import torch

    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)


def _means(totals: dict[str, float], count: int) -> dict[str, float]:
    return {name: total / max(count, 1) for name, total in totals.items()}


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


def _read(path: Path, device: str) -> tuple[Any, str | None]:
    """What a checkpoint file holds, or why it cannot be read (truncated, not a torch file)."""
    import torch

    try:
        return torch.load(path, map_location=device, weights_only=True), None
    except Exception as error:  # torch raises several kinds for a damaged file
        return None, f"cannot be read ({_first_line(error)})"


def _resume(latest: tuple[int, Path], store: TrainedStore, model: torch.nn.Module, optimizer: Any, scaler: Any,
            average: WeightAverage | None, device: str, description: str) -> dict[str, Any] | None:
    """Load the last epoch's checkpoint into the model, optimizer, scaler and weight average, and
    return the loop's state; ``None`` when it cannot be resumed from (set aside, with a warning;
    the optimizer, scaler and average may then hold part of it: the caller makes new ones)."""
    path = latest[1]
    saved, problem = _read(path, device)
    if problem is None and (not isinstance(saved, dict) or any(key not in saved for key in CHECKPOINT_KEYS)):
        problem = "is not a checkpoint of this training loop"
    if problem is None and (not isinstance(saved["epoch"], int) or saved["epoch"] < 1):
        problem = f"holds no finished epoch (epoch {saved['epoch']!r})"
    if problem is None:
        problem = weights_problem(saved["model"], model.state_dict())
    if problem is None:
        try:
            optimizer.load_state_dict(saved["optimizer"])
            scaler.load_state_dict(saved["scaler"])
        except (ValueError, KeyError, TypeError, RuntimeError) as error:
            problem = f"holds another optimizer's state ({_first_line(error)})"
    if problem is None and average is not None:
        try:
            average.load_state_dict(saved.get("ema"))
        except ValueError as error:
            problem = f"holds no weight average of this model ({error})"
    if problem is not None:
        kept = store.set_aside(path)
        warnings.warn(f"{path}: {problem}; set aside as {kept.name}, and {description} starts again from its "
                      "first epoch", CheckpointWarning, stacklevel=3)
        return None
    model.load_state_dict(saved.pop("model"))
    for key in ("optimizer", "scaler", "ema"):
        saved.pop(key, None)
    logger.info("%s: resuming after epoch %d", description, saved["epoch"])
    return {**saved, "resumed": saved["epoch"]}


def train(
    model: torch.nn.Module,
    samples: Sequence[Sample],
    step: Step,
    recipe: Recipe,
    store: TrainedStore,
    *,
    device: str = "cpu",
    description: str = "training",
    parameters: Iterable[torch.nn.Parameter] | None = None,
    backbone: Sequence[str] = (),
    augmentation: Augmentation | None = None,
) -> FitRecord:
    """Train ``model`` on ``samples`` by ``recipe`` (``step`` runs it on a batch), checkpointing
    into ``store``, and write its final weights there. Resumes from the store's last epoch
    checkpoint when there is one. ``backbone``: the name prefixes of the parameters
    ``recipe.backbone_learning_rate`` applies to; ``augmentation``: what each batch goes
    through first."""
    if not samples:
        raise TrainingError(f"{description}: the training split has no image")
    trainable = [p for p in (parameters if parameters is not None else model.parameters()) if p.requires_grad]
    groups = parameter_groups(model, trainable, recipe, backbone, description)
    with store.fitting():
        return _train(model, samples, step, recipe, store, device, description, trainable, groups, augmentation)


def parameter_groups(model: torch.nn.Module, trainable: Sequence[torch.nn.Parameter], recipe: Recipe,
                     backbone: Sequence[str], description: str = "training") -> list[dict[str, Any]]:
    """AdamW's parameter groups: one at ``learning_rate``, and the parameters whose names start
    with a ``backbone`` prefix at ``backbone_learning_rate`` when the recipe sets it. A recipe
    that sets it for a model with no such parameter is a ``ValueError``, not a silent no-op."""
    if recipe.backbone_learning_rate is None:
        return [{"params": list(trainable)}]
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    inside = [p for p in trainable if backbone and names.get(id(p), "").startswith(tuple(backbone))]
    if not inside:
        where = f"no trainable parameter under {', '.join(backbone)}" if backbone else "no backbone"
        raise ValueError(f"{description}: recipe {recipe.name!r} sets backbone_learning_rate, but the model has "
                         f"{where}: leave it unset")
    taken = {id(p) for p in inside}
    return [{"params": [p for p in trainable if id(p) not in taken]},
            {"params": inside, "lr": recipe.backbone_learning_rate}]


def _train(model: torch.nn.Module, samples: Sequence[Sample], step: Step, recipe: Recipe, store: TrainedStore,
           device: str, description: str, trainable: list[torch.nn.Parameter], groups: list[dict[str, Any]],
           augmentation: Augmentation | None) -> FitRecord:
    import torch

    def fresh() -> tuple[Any, Any, WeightAverage | None]:
        return (torch.optim.AdamW(groups, lr=recipe.learning_rate, weight_decay=recipe.weight_decay),
                torch.amp.GradScaler(torch.device(device).type, enabled=recipe.mixed_precision == "fp16"),
                WeightAverage(model, recipe.ema_decay, recipe.ema_warmup) if recipe.ema_decay else None)

    peaks = [group.get("lr", recipe.learning_rate) for group in groups]
    optimizer, scaler, average = fresh()
    state: dict[str, Any] = {"epoch": 0, "steps": 0, "train_s": 0.0, "images": 0, "history": [], "resumed": None}
    latest = store.latest_epoch()
    if latest is not None:
        resumed = _resume(latest, store, model, optimizer, scaler, average, device, description)
        if resumed is None:
            optimizer, scaler, average = fresh()
        else:
            state = resumed
    augment = augmentation if augmentation is not None and augmentation.active else None
    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    batches_per_epoch = math.ceil(len(samples) / recipe.batch_size)
    for epoch in range(state["epoch"] + 1, recipe.epochs + 1):
        started = time.perf_counter()
        torch.manual_seed(_epoch_seed(recipe, epoch))
        order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(_epoch_seed(recipe, epoch)))
        totals: dict[str, float] = {}
        model.train()
        optimizer.zero_grad(set_to_none=True)
        bar = progress_bar(total=batches_per_epoch, desc=f"{description}, epoch {epoch}/{recipe.epochs}",
                           unit="batch", leave=False)
        for index in range(batches_per_epoch):
            chunk = [samples[int(i)] for i in order[index * recipe.batch_size:(index + 1) * recipe.batch_size]]
            if augment is not None:
                chunk = augment(chunk, epoch)
            with _autocast(device, recipe.mixed_precision):
                outputs = step(chunk)
            terms = _loss_terms(outputs)
            if not math.isfinite(terms["loss"]):
                raise TrainingError(f"{description}: the loss is {terms['loss']} at epoch {epoch}, batch {index + 1} "
                                    f"(lower learning_rate, or set max_grad_norm)")
            scaler.scale(outputs.loss / recipe.grad_accumulation).backward()
            if (index + 1) % recipe.grad_accumulation == 0 or index + 1 == batches_per_epoch:
                if recipe.warmup_steps:
                    ramp = min(1.0, (state["steps"] + 1) / recipe.warmup_steps)
                    for group, peak in zip(optimizer.param_groups, peaks):
                        group["lr"] = peak * ramp
                if recipe.max_grad_norm:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(trainable, recipe.max_grad_norm)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                state["steps"] += 1
                if average is not None:
                    average.update(model)
            for name, value in terms.items():
                totals[name] = totals.get(name, 0.0) + value
            state["images"] += len(chunk)
            bar.update(1)
            bar.set_postfix(loss=f"{terms['loss']:.3f}")
        bar.close()
        state["history"].append(_means(totals, batches_per_epoch))
        state["train_s"] += time.perf_counter() - started
        state["epoch"] = epoch
        with store.epoch_checkpoint(epoch) as path:
            torch.save({**{k: v for k, v in state.items() if k != "resumed"}, "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
                        "ema": average.state_dict() if average is not None else None}, path)
    if average is not None:
        model.load_state_dict(average.weights)
    model.eval()
    with store.atomic(store.weights.name) as path:
        torch.save(model.state_dict(), path)
    history = state["history"]
    return store.finish(FitRecord(
        epochs=recipe.epochs, steps=state["steps"], train_s=state["train_s"], images=state["images"],
        losses=history[-1], first_losses=history[0], history=history,
        peak_gpu_memory_mb=torch.cuda.max_memory_allocated(device) / 2**20 if cuda else None,
        resumed_after_epoch=state["resumed"],
    ))


def load_weights(model: torch.nn.Module, store: TrainedStore, device: str = "cpu") -> None:
    """Load a finished fit's weights into ``model``; weights that do not fit it (another
    model's, put in the store by hand) are a :class:`TrainingError` naming the file."""
    weights, problem = _read(store.weights, device)
    problem = problem or weights_problem(weights, model.state_dict())
    if problem is not None:
        raise TrainingError(f"{store.weights}: {problem}; delete {store.folder} to train again")
    model.load_state_dict(weights)
    model.eval()
