"""The training loop on a model small enough to reason about: gradient accumulation counts its
steps, a fit cut short resumes to the same weights, a loss that is not finite stops it with
where, mixed precision runs on CPU; a backbone trains at its own rate, the learning rate warms
up, a weight average is the average of the steps, and a fit with all of these resumes exactly."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from rf100vl_hf.training.loop import TrainingError, load_weights, train
from rf100vl_hf.training.recipe import Recipe
from rf100vl_hf.training.samples import Sample
from rf100vl_hf.training.store import TrainedStore

SAMPLES = [Sample(Image.new("RGB", (1, 1)), np.zeros((1, 4)), np.array([i % 3])) for i in range(10)]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1)


def _step(model: torch.nn.Module, fail_at: int | None = None, calls: list | None = None):
    def step(batch: list[Sample]) -> SimpleNamespace:
        if calls is not None:
            calls.append(len(batch))
            if fail_at is not None and len(calls) == fail_at:
                raise KeyboardInterrupt  # the run is killed here
        x = torch.nn.functional.one_hot(torch.tensor([int(s.labels[0]) for s in batch]), 3).float()
        x = x + 0.1 * torch.randn_like(x)  # the epoch's seed makes this repeatable
        loss = ((model(x).squeeze(1) - torch.arange(len(batch)).float()) ** 2).mean()
        return SimpleNamespace(loss=loss, loss_dict={"l2": loss})
    return step


def test_accumulated_gradients_count_one_step_per_group_and_the_record_says_what_ran(tmp_path: Path) -> None:
    model = _model()
    recipe = Recipe("r", epochs=2, batch_size=2, learning_rate=0.1, grad_accumulation=2)
    record = train(model, SAMPLES, _step(model), recipe, TrainedStore(tmp_path, {"k": 1}))
    assert record.steps == 2 * 3  # 5 batches an epoch in groups of 2: 3 optimizer steps
    assert record.images == 20 and len(record.history) == 2 and set(record.losses) == {"loss", "l2"}
    assert record.losses["loss"] < record.first_losses["loss"] and record.images_per_s > 0
    assert TrainedStore(tmp_path, {"k": 1}).record() == record and not list(tmp_path.glob("epoch-*"))


def test_a_fit_cut_short_resumes_at_its_epoch_and_ends_with_the_uninterrupted_weights(tmp_path: Path) -> None:
    recipe = Recipe("r", epochs=3, batch_size=3, learning_rate=0.05)
    whole = _model()
    train(whole, SAMPLES, _step(whole), recipe, TrainedStore(tmp_path / "whole", {}))
    cut, calls = _model(), []
    with pytest.raises(KeyboardInterrupt):
        train(cut, SAMPLES, _step(cut, fail_at=6, calls=calls), recipe, TrainedStore(tmp_path / "cut", {}))
    assert [p.name for p in (tmp_path / "cut").glob("epoch-*.pt")] == ["epoch-0001.pt"]
    resumed = _model()
    record = train(resumed, SAMPLES, _step(resumed), recipe, TrainedStore(tmp_path / "cut", {}))
    assert record.resumed_after_epoch == 1 and record.steps == 3 * 4
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    fresh = _model()
    load_weights(fresh, TrainedStore(tmp_path / "cut", {}))
    assert torch.equal(fresh.weight, whole.weight)


def test_a_loss_that_is_not_finite_stops_the_fit_naming_its_epoch_and_batch(tmp_path: Path) -> None:
    model = _model()

    def step(batch: list[Sample]) -> SimpleNamespace:
        return SimpleNamespace(loss=model(torch.ones(1, 3)).sum() * float("nan"))

    with pytest.raises(TrainingError, match=r"the loss is nan at epoch 1, batch 1"):
        train(model, SAMPLES, step, Recipe("r", epochs=1, batch_size=4, learning_rate=0.1), TrainedStore(tmp_path, {}))


def test_bfloat16_mixed_precision_trains_on_cpu(tmp_path: Path) -> None:
    model = _model()
    recipe = Recipe("r", epochs=2, batch_size=5, learning_rate=0.1, mixed_precision="bf16")
    record = train(model, SAMPLES, _step(model), recipe, TrainedStore(tmp_path, {}))
    assert np.isfinite(record.losses["loss"]) and record.steps == 4


def _two_layer() -> torch.nn.Module:
    """A "backbone" and a "head", so that a recipe can give the backbone its own learning rate."""
    torch.manual_seed(0)
    return torch.nn.Sequential(OrderedDict(backbone=torch.nn.Linear(3, 3), head=torch.nn.Linear(3, 1)))


def test_the_backbone_trains_at_its_own_rate_and_a_model_without_one_is_refused(tmp_path: Path) -> None:
    model = _two_layer()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    recipe = Recipe("r", epochs=2, batch_size=5, learning_rate=0.1, backbone_learning_rate=1e-12, weight_decay=0.0)
    train(model, SAMPLES, _step(model), recipe, TrainedStore(tmp_path, {}), backbone=("backbone.",))
    moved = {name: float((tensor - before[name]).abs().max()) for name, tensor in model.state_dict().items()}
    assert max(moved["backbone.weight"], moved["backbone.bias"]) < 1e-9
    assert min(moved["head.weight"], moved["head.bias"]) > 1e-2
    with pytest.raises(ValueError, match="sets backbone_learning_rate, but the model has no backbone: leave it unset"):
        train(model, SAMPLES, _step(model), recipe, TrainedStore(tmp_path / "none", {}))
    with pytest.raises(ValueError, match="no trainable parameter under encoder."):
        train(model, SAMPLES, _step(model), recipe, TrainedStore(tmp_path / "wrong", {}), backbone=("encoder.",))


def test_the_learning_rate_warms_up_over_its_first_steps(tmp_path: Path) -> None:
    model = _model()
    before = model.weight.detach().clone()
    recipe = Recipe("r", epochs=1, batch_size=10, learning_rate=0.1, warmup_steps=4, weight_decay=0.0)
    train(model, SAMPLES, _step(model), recipe, TrainedStore(tmp_path, {}))
    # Adam's first step moves every weight by its learning rate: here a quarter of 0.1
    np.testing.assert_allclose((model.weight.detach() - before).abs().numpy(), 0.025, rtol=1e-3)


def test_the_weights_of_a_fit_with_a_weight_average_are_the_average_of_its_steps(tmp_path: Path) -> None:
    plain, seen = _model(), []
    step = _step(plain)

    def watched(batch: list[Sample]) -> SimpleNamespace:
        seen.append(plain.weight.detach().clone())  # the weights after the steps before this one
        return step(batch)

    recipe = Recipe("r", epochs=4, batch_size=10, learning_rate=0.1)  # one step an epoch
    train(plain, SAMPLES, watched, recipe, TrainedStore(tmp_path / "plain", {}))
    averaged = _model()
    train(averaged, SAMPLES, _step(averaged), replace(recipe, ema_decay=0.6, ema_warmup=2),
          TrainedStore(tmp_path / "ema", {}))
    expected = seen[0]
    for number, weights in enumerate([*seen[1:], plain.weight.detach()], start=1):
        decay = 0.6 * (1 - math.exp(-number / 2))
        expected = decay * expected + (1 - decay) * weights
    torch.testing.assert_close(averaged.weight.detach(), expected)
    assert not torch.allclose(averaged.weight, plain.weight)


def test_a_fit_with_every_addition_cut_short_resumes_to_the_uninterrupted_weights(tmp_path: Path) -> None:
    recipe = Recipe("r", epochs=3, batch_size=3, learning_rate=0.05, backbone_learning_rate=0.01, warmup_steps=5,
                    ema_decay=0.9, ema_warmup=3)
    whole = _two_layer()
    train(whole, SAMPLES, _step(whole), recipe, TrainedStore(tmp_path / "whole", {}), backbone=("backbone.",))
    cut, calls = _two_layer(), []
    with pytest.raises(KeyboardInterrupt):
        train(cut, SAMPLES, _step(cut, fail_at=6, calls=calls), recipe, TrainedStore(tmp_path / "cut", {}),
              backbone=("backbone.",))
    resumed = _two_layer()
    record = train(resumed, SAMPLES, _step(resumed), recipe, TrainedStore(tmp_path / "cut", {}),
                   backbone=("backbone.",))
    assert record.resumed_after_epoch == 1
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
