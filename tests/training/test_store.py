"""The trained-weights store against what breaks it: a truncated or garbage epoch checkpoint, one
of another model or of another program, the leftovers of a run killed mid-write, finished
weights of another model, a store that cannot be written, a split with no box. Each is a
warned repair (the checkpoint set aside, the fit started again, ending with the weights an
uninterrupted fit has) or an error naming the file; never a traceback from torch."""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rf100vl_hf.training.loop import load_weights, train
from rf100vl_hf.training.recipe import Recipe
from rf100vl_hf.training.store import CheckpointWarning, TrainedStore, TrainingError, file_sha256

from tests.training.test_loop import SAMPLES, _model, _step

RECIPE = Recipe("r", epochs=3, batch_size=3, learning_rate=0.05)


def _whole(folder: Path) -> torch.nn.Module:
    model = _model()
    train(model, SAMPLES, _step(model), RECIPE, TrainedStore(folder, {}))
    return model


def _cut_after_first_epoch(folder: Path) -> Path:
    """A fit killed in its second epoch: the first epoch's checkpoint is in the store."""
    model, calls = _model(), []
    with pytest.raises(KeyboardInterrupt):
        train(model, SAMPLES, _step(model, fail_at=6, calls=calls), RECIPE, TrainedStore(folder, {}))
    (checkpoint,) = folder.glob("epoch-*.pt")
    return checkpoint


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00not a checkpoint\xff" * 100)


def _another_model(path: Path) -> None:
    other = torch.nn.Linear(5, 2)
    saved = torch.load(path, weights_only=True)
    torch.save({**saved, "model": other.state_dict()}, path)


def _another_program(path: Path) -> None:
    torch.save({"weights": torch.zeros(3)}, path)  # a torch file, but not this loop's checkpoint


def _another_optimizer(path: Path) -> None:
    saved = torch.load(path, weights_only=True)
    saved["optimizer"]["param_groups"].append(dict(saved["optimizer"]["param_groups"][0]))
    torch.save(saved, path)


@pytest.mark.parametrize("damage", [_truncated, _garbage, _another_model, _another_program, _another_optimizer],
                         ids=lambda damage: damage.__name__.strip("_"))
def test_a_checkpoint_that_cannot_be_resumed_from_is_set_aside_and_the_fit_starts_again(
    tmp_path: Path, damage
) -> None:
    whole = _whole(tmp_path / "whole")
    checkpoint = _cut_after_first_epoch(tmp_path / "cut")
    damage(checkpoint)
    again = _model()
    with pytest.warns(CheckpointWarning, match=r"epoch-0001\.pt: .*set aside as epoch-0001\.pt\.unreadable"):
        record = train(again, SAMPLES, _step(again), RECIPE, TrainedStore(tmp_path / "cut", {}))
    assert record.resumed_after_epoch is None and record.steps == 3 * 4
    assert (tmp_path / "cut" / "epoch-0001.pt.unreadable").is_file()  # kept for a person to look at
    for a, b in zip(whole.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)  # started again from the model's own weights: the uninterrupted fit's


def test_what_a_run_killed_mid_write_leaves_is_removed_and_the_fit_resumes(tmp_path: Path) -> None:
    whole = _whole(tmp_path / "whole")
    folder = tmp_path / "cut"
    _cut_after_first_epoch(folder)
    (folder / ".epoch-0002.pt.k1ll3d").write_bytes(b"half a checkpoint")  # what kill -9 in torch.save leaves
    (folder / "epoch-notanumber.pt").write_bytes(b"")  # a file that only looks like a checkpoint
    resumed = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = train(resumed, SAMPLES, _step(resumed), RECIPE, TrainedStore(folder, {}))
    assert record.resumed_after_epoch == 1 and not list(folder.glob(".epoch-*"))
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_finished_weights_of_another_model_are_an_error_naming_the_file(tmp_path: Path) -> None:
    _whole(tmp_path)
    store = TrainedStore(tmp_path, {})
    torch.save(torch.nn.Linear(7, 7).state_dict(), store.weights)
    store.finish(_record_of(store))  # the record signed again: only loading can tell
    with pytest.raises(TrainingError, match=r"weights\.pt: holds the weights of another model .*delete .* to train"):
        load_weights(_model(), store)
    store.weights.write_bytes(b"truncated")
    assert store.record() is None  # its hash no longer matches: not a finished fit, trained again


def _record_of(store: TrainedStore):
    import json

    from rf100vl_hf.training.store import RECORD_FILE, FitRecord

    data = json.loads((store.folder / RECORD_FILE).read_text(encoding="utf-8"))
    return FitRecord(**{**data, "weights_sha256": file_sha256(store.weights)})


def test_a_store_that_cannot_be_written_is_an_error_before_an_epoch_is_spent(tmp_path: Path) -> None:
    blocked = tmp_path / "results"
    blocked.write_text("a file where the results folder should be")
    calls: list[int] = []
    model = _model()
    with pytest.raises(TrainingError, match=r"results/trained: the trained-weights store cannot be written"):
        train(model, SAMPLES, _step(model, calls=calls), RECIPE, TrainedStore(blocked / "trained", {}))
    assert calls == []  # refused before the first batch


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not stop root")
def test_a_read_only_store_is_an_error_before_an_epoch_is_spent(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    folder.chmod(0o555)
    model = _model()
    try:
        with pytest.raises(TrainingError, match="cannot be written"):
            train(model, SAMPLES, _step(model), RECIPE, TrainedStore(folder, {}))
    finally:
        folder.chmod(0o755)


def test_a_split_with_no_box_counts_none_without_decoding_an_image() -> None:
    import datasets
    import numpy as np

    from rf100vl_hf.training.samples import Samples

    rows = {"image": [{"bytes": b"not decoded", "path": None}] * 3, "image_id": [1, 2, 3],
            "file_name": ["a.jpg", "b.jpg", "c.jpg"],
            "objects": [{"bbox": [], "category": []}] * 2 + [{"bbox": [[1.0, 1.0, 2.0, 2.0]], "category": [0]}]}
    split = datasets.Dataset.from_dict(rows).cast_column("image", datasets.Image(decode=False))
    samples = Samples(split)
    assert samples.n_boxes == 1
    assert samples.relabelled({2: (np.zeros((0, 4)), np.zeros(0))}).n_boxes == 0


def test_a_checkpoint_without_the_weight_average_its_recipe_keeps_is_set_aside(tmp_path: Path) -> None:
    recipe = replace(RECIPE, ema_decay=0.9)
    whole = _model()
    train(whole, SAMPLES, _step(whole), recipe, TrainedStore(tmp_path / "whole", {}))
    cut, calls = _model(), []
    with pytest.raises(KeyboardInterrupt):
        train(cut, SAMPLES, _step(cut, fail_at=6, calls=calls), recipe, TrainedStore(tmp_path / "cut", {}))
    (checkpoint,) = (tmp_path / "cut").glob("epoch-*.pt")
    torch.save({**torch.load(checkpoint, weights_only=True), "ema": None}, checkpoint)
    again = _model()
    with pytest.warns(CheckpointWarning, match="holds no weight average of this model"):
        record = train(again, SAMPLES, _step(again), recipe, TrainedStore(tmp_path / "cut", {}))
    assert record.resumed_after_epoch is None
    for a, b in zip(whole.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


def test_a_saved_average_is_checked_as_finished_weights_are() -> None:
    """One check refuses another model's tensors, whether saved as a fit's weights or as its average."""
    from rf100vl_hf.training.ema import WeightAverage

    average = WeightAverage(_model(), decay=0.9)
    with pytest.raises(ValueError, match=r"holds the weights of another model \(.* tensors missing"):
        average.load_state_dict({"steps": 3, "weights": torch.nn.Sequential(_model()).state_dict()})
    reshaped = {name: torch.zeros(*tensor.shape, 2) for name, tensor in average.weights.items()}
    with pytest.raises(ValueError, match=r"holds the weights of another model \(.* has another shape\)"):
        average.load_state_dict({"steps": 3, "weights": reshaped})
    with pytest.raises(ValueError, match="step count is '3', not an integer"):
        average.load_state_dict({"steps": "3", "weights": dict(average.weights)})
    average.load_state_dict({"steps": 3, "weights": dict(average.weights)})
    assert average.steps == 3
