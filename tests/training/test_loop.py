"""The training loop on a model small enough to reason about: gradient accumulation counts its
steps, a fit cut short resumes to the same weights, a loss that is not finite stops it with
where, and mixed precision runs on CPU."""

from __future__ import annotations

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
