"""D-FINE, DEIMv2, LW-DETR and RF-DETR fine-tuned inside the matrix (``--rf100vl-train``) by
their own ``detr-finetune`` recipes, with fewer, larger steps: each tiny model learns the
generated shapes it scored nothing on untrained. RT-DETRv2's longer run, resuming, seeds and STAC
are in ``test_training.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_rf100vl.adapters.registry import adapter_class, create

from tests.plugin.helpers import link, results
from tests.support.shapes_export import write_shapes_export

MODELS = ("d-fine", "deimv2", "lw-detr", "rf-detr")
EPOCHS = 8
FAST = ("batch_size=4", "grad_accumulation=1", "learning_rate=2e-3", "backbone_learning_rate=2e-3", "warmup_steps=0",
        "ema_decay=0.9", f"epochs={EPOCHS}")
"""96 steps of a few images instead of the recipes' thousands of 16 or 32, with no warm-up and a
shorter weight average; the recipes' flips and multi-scale sides stay as they are."""


@pytest.fixture(scope="module", autouse=True)
def _training_modules_loaded_once() -> None:
    """What building and fitting the models imports, before any in-process run: pytester drops the
    modules a run imported, and a configuration class imported again is another class to the
    configurations that hold the first one."""
    import scipy.optimize  # noqa: F401

    for name in MODELS:
        create(f"{name}:tiny").close()


@pytest.fixture
def shapes_dir(data_dir: Path, tmp_path: Path) -> Path:
    link(data_dir, "shapes", write_shapes_export(tmp_path / "shapes"))
    return data_dir


def test_each_closed_set_detr_fine_tuned_by_its_recipe_learns_the_shapes_it_scored_nothing_on(
    pytester: pytest.Pytester, shapes_dir: Path
) -> None:
    common = [*(f"--rf100vl-model={name}:tiny" for name in MODELS), "--rf100vl-dataset=shapes",
              "--rf100vl-device=cpu", "--benchmark-disable", f"--rf100vl-data-option=data-dir={shapes_dir}",
              "-p", "no:cacheprovider"]
    before, after = pytester.path / "before", pytester.path / "after"
    pytester.runpytest(*common, f"--rf100vl-results={before}").assert_outcomes(passed=len(MODELS))
    pytester.runpytest(*common, *(f"--rf100vl-train-option={option}" for option in FAST), "--rf100vl-train=train",
                       f"--rf100vl-results={after}").assert_outcomes(passed=len(MODELS))
    untrained = {row["model"]: row for row in results(before)}
    trained = {row["model"]: row for row in results(after)}
    for name in MODELS:
        recipe = adapter_class(name).recipes["detr-finetune"]
        hyper = json.loads(trained[name]["hyperparameters"])
        assert trained[name]["recipe"] == "detr-finetune" and trained[name]["train_steps"] == EPOCHS * 12
        assert (hyper["flip"], hyper.get("min_scale", 1.0), hyper.get("max_scale", 1.0)) == (
            recipe.flip, recipe.min_scale, recipe.max_scale)
        assert trained[name]["train_loss_final"] < trained[name]["train_loss_first"]
        assert untrained[name]["ap"] < 1 and trained[name]["ap"] >= untrained[name]["ap"] + 2, (
            name, untrained[name]["ap"], trained[name]["ap"])
