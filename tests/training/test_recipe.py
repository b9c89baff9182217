"""Recipes take overrides in their own types and refuse unknown ones; seeds parse as ranges;
seed rows are told apart when merged and averaged in tables."""

from __future__ import annotations

import pytest

from rf100vl_hf.results.rows import latest
from rf100vl_hf.results.tables import ap_table, over_seeds
from rf100vl_hf.training.recipe import Recipe, parse_seeds, regime_of


def test_overrides_are_typed_and_unknown_or_bad_ones_are_refused() -> None:
    recipe = Recipe("r", epochs=5, batch_size=4, learning_rate=3e-4, extra={"student_epochs": 2})
    changed = recipe.with_options({"epochs": "2", "federated": "true", "learning_rate": "1e-3",
                                   "student_epochs": "7", "seed": "3"})
    assert (changed.epochs, changed.federated, changed.learning_rate, changed.extra, changed.seed) == (
        2, True, 1e-3, {"student_epochs": 7}, 3)
    assert changed.hyperparameters()["student_epochs"] == 7 and "seed" not in changed.hyperparameters()
    with pytest.raises(ValueError, match="has no hyper-parameter epoch .*epochs"):
        recipe.with_options({"epoch": "2"})
    with pytest.raises(ValueError, match="mixed_precision must be one of no, fp16, bf16"):
        recipe.with_options({"mixed_precision": "fp8"})


def test_regimes_and_seeds() -> None:
    assert [regime_of(s) for s in (None, "fewshot_10", "fewshot_5", "semisup_10", "train")] == [
        "zero-shot", "few-shot", "few-shot", "semi-supervised", "fully-supervised"]
    with pytest.raises(ValueError, match="no regime trains on split 'test'"):
        regime_of("test")
    assert parse_seeds("0-2") == (0, 1, 2) and parse_seeds("1-2,5,1") == (1, 2, 5)
    for bad in ("a", "3-1", "1-"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def _row(seed: int, ap: float) -> dict:
    return {"model": "m", "spec": "m", "dataset": "d", "domain": "Aerial", "seed": seed, "ap": ap,
            "train_split": "train", "timestamp": "2026-01-01T00:00:00+00:00"}


def test_seed_rows_are_kept_apart_when_merged_and_averaged_in_tables() -> None:
    rows = [_row(0, 10.0), _row(1, 20.0), _row(2, 60.0)]
    assert len(latest(rows)) == 3
    (merged,) = over_seeds(rows)
    assert merged["ap"] == pytest.approx(30.0) and merged["seeds"] == 3
    table = ap_table(rows)
    assert table.rows[0][2] == pytest.approx(30.0) and len(table.header) == 3


def test_additions_left_off_keep_a_recipes_hyperparameters_and_set_ones_are_named() -> None:
    plain = Recipe("detr-finetune", epochs=50, batch_size=8, learning_rate=1e-4)
    assert plain.hyperparameters() == {  # what rows and trained-weights keys held before the additions existed
        "epochs": 50, "batch_size": 8, "learning_rate": 1e-4, "weight_decay": 1e-4, "max_grad_norm": 0.1,
        "federated": False, "mixed_precision": "no", "grad_accumulation": 1}
    changed = plain.with_options({"backbone_learning_rate": "1e-5", "ema_decay": "0.99", "ema_warmup": "10",
                                  "warmup_steps": "5", "flip": "0.5", "min_scale": "0.75", "max_scale": "1.25",
                                  "single_scale_epochs": "2"})
    assert {key: value for key, value in changed.hyperparameters().items() if key not in plain.hyperparameters()} == {
        "backbone_learning_rate": 1e-5, "ema_decay": 0.99, "ema_warmup": 10, "warmup_steps": 5, "flip": 0.5,
        "min_scale": 0.75, "max_scale": 1.25, "single_scale_epochs": 2}


@pytest.mark.parametrize(("options", "message"), [
    ({"backbone_learning_rate": "0"}, "backbone_learning_rate must be > 0 or none"),
    ({"ema_decay": "1"}, r"ema_decay must be in \[0, 1\)"),
    ({"flip": "1.5"}, r"flip must be in \[0, 1\]"),
    ({"min_scale": "1.5"}, "min_scale and max_scale must satisfy 0 < min_scale <= max_scale, got 1.5 and 1.0"),
    ({"warmup_steps": "-1"}, "warmup_steps must be >= 0"),
])
def test_additions_out_of_range_are_refused_naming_them(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Recipe("r", epochs=1, batch_size=1, learning_rate=1e-3).with_options(options)
