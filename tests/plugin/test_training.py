"""Fine-tuning inside the matrix (``--rf100vl-train``): a detector trained by the plugin on a
generated export of clear shapes learns it; Grounding DINO's few-shot recipe runs on the
embedded sample; weights are reused, a killed fit resumes at its epoch, seeds give their rows
and both spreads."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugin.helpers import link, results
from tests.support.shapes_export import write_shapes_export

TINY_DETR = ["--rf100vl-model", "rt-detrv2:tiny", "--rf100vl-dataset", "shapes", "--rf100vl-device", "cpu",
             "--benchmark-disable", "-p", "no:cacheprovider"]
FAST = ["--rf100vl-train-option", "batch_size=4", "--rf100vl-train-option", "learning_rate=2e-3"]


def test_a_fits_key_is_the_one_stored_weights_were_filed_under() -> None:
    """The key derived from the identity columns is the one the hand-listed key was, so weights
    trained before stay found (same digest); only the dtype the model runs in is left out."""
    from types import SimpleNamespace

    from rf100vl_hf.provenance import versions
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.store import key_digest

    from pytest_rf100vl.adapters.base import ModelInfo
    from pytest_rf100vl.core.training_plan import TrainingPlan
    from pytest_rf100vl.session.training import training_key

    info = ModelInfo("rt-detrv2", "tiny", "abc123", {"threshold": 0.3, "url": "https://user:pw@host/x?k=v"})
    plan = TrainingPlan("fewshot_10", Recipe("r", epochs=3, batch_size=4, learning_rate=2e-3, seed=7))
    split = SimpleNamespace(metadata={"name": "shapes", "fingerprint": "f00d"},
                            split_parameters=lambda name: json.dumps({"fewshot_k": 10, "asked": name}))
    hand_listed = {
        "model": "rt-detrv2", "checkpoint": "tiny", "model_revision": "abc123",
        "adapter_options": json.dumps({"threshold": 0.3, "url": "https://host/x"}, sort_keys=True),
        "dataset": "shapes", "dataset_fingerprint": "f00d", "train_split": "fewshot_10",
        "train_split_parameters": split.split_parameters("fewshot_10"), "recipe": "r",
        "hyperparameters": json.dumps(plan.recipe.hyperparameters(), sort_keys=True), "seed": 7,
        "regime": plan.regime, "versions": versions(("torch", "rf100vl-hf")),
    }
    key = training_key(info, split, plan, ("torch",))
    assert key == hand_listed and key_digest(key) == key_digest(hand_listed)


@pytest.fixture(scope="module", autouse=True)
def _training_modules_loaded_once() -> None:
    """What fitting imports (the Hungarian matcher's scipy, the models), before any in-process
    run: pytester drops the modules a run imported, and these cannot be imported twice."""
    import scipy.optimize  # noqa: F401
    import scipy.stats  # noqa: F401

    import pytest_rf100vl.adapters.grounding_dino  # noqa: F401
    import pytest_rf100vl.adapters.rt_detr  # noqa: F401


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_shapes_export(tmp_path_factory.mktemp("shapes") / "export")


@pytest.fixture
def shapes_dir(data_dir: Path, shapes: Path) -> Path:
    link(data_dir, "shapes", shapes)
    return data_dir


def _row(folder: Path, **wanted: object) -> dict:
    (row,) = [row for row in results(folder) if all(row.get(k) == v for k, v in wanted.items())]
    return row


def test_a_detector_trained_by_the_plugin_learns_the_shapes_it_scored_zero_on(
    pytester: pytest.Pytester, shapes_dir: Path
) -> None:
    before, after = pytester.path / "before", pytester.path / "after"
    pytester.runpytest(*TINY_DETR, f"--rf100vl-data-option=data-dir={shapes_dir}", f"--rf100vl-results={before}"
                       ).assert_outcomes(passed=1)
    pytester.runpytest(*TINY_DETR, *FAST, "--rf100vl-train-option", "epochs=40", "--rf100vl-train", "train",
                       f"--rf100vl-data-option=data-dir={shapes_dir}", f"--rf100vl-results={after}").assert_outcomes(passed=1)
    untrained, trained = _row(before), _row(after)
    assert untrained["regime"] == "zero-shot" and untrained["ap"] < 2
    assert trained["regime"] == "fully-supervised" and trained["train_split"] == "train"
    assert trained["ap"] >= 30, trained["ap"]
    assert trained["train_loss_final"] < trained["train_loss_first"] and trained["train_steps"] == 40 * 12
    assert json.loads(trained["hyperparameters"])["epochs"] == 40 and trained["weights_sha256"]
    summary = (after / "summary.md").read_text(encoding="utf-8")
    assert "## AP50:95 (%), fully supervised (train)" in summary and "## Fine-tuning" in summary


def test_grounding_dino_few_shot_recipe_runs_on_the_sample_and_a_rerun_loads_its_weights(
    pytester: pytest.Pytester, small_sample: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rf100vl_hf.sample import write_sample_export

    from pytest_rf100vl.adapters.grounding_dino import GroundingDinoAdapter

    write_sample_export(data_dir / "sample-full")
    calls: list[str] = []
    fit = GroundingDinoAdapter.fit
    monkeypatch.setattr(GroundingDinoAdapter, "fit", lambda self, *a: calls.append("fit") or fit(self, *a))
    args = ["--rf100vl-model", "grounding-dino:tiny", "--rf100vl-dataset", "sample-full", "--rf100vl-device", "cpu",
            f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-train", "fewshot_10", "--benchmark-disable",
            "-p", "no:cacheprovider"]
    pytester.runpytest(*args).assert_outcomes(passed=1)
    folder = pytester.path / ".rf100vl" / "results"
    first = _row(folder)
    hyper = json.loads(first["hyperparameters"])
    assert (first["recipe"], hyper["epochs"], hyper["batch_size"], hyper["learning_rate"]) == ("gdino-fewshot", 5, 4, 3e-4)
    assert first["regime"] == "few-shot" and first["train_loss_final"] < first["train_loss_first"]
    assert calls == ["fit"]
    pytester.runpytest(*args).assert_outcomes(passed=1)  # the row is reused: nothing loads
    assert results(folder) == [first]  # nor is it written again
    pytester.runpytest(*args, "--rf100vl-rerun").assert_outcomes(passed=1)  # scored again on the stored weights
    assert calls == ["fit"]
    again = results(folder)[-1]
    assert again["weights_reused"] is True and again["weights_sha256"] == first["weights_sha256"]
    assert again["ap"] == first["ap"]


def _watch_and_kill(process: subprocess.Popen, trained: Path, deadline: float) -> None:
    """Kill ``process`` as soon as a fit under ``trained`` has finished its first epoch."""
    while time.monotonic() < deadline and process.poll() is None:
        if any(trained.glob("*/*/*/epoch-0001.pt")):
            process.kill()
            return
        time.sleep(0.02)
    raise AssertionError("the fit never finished its first epoch")


def test_a_fit_killed_in_its_second_epoch_resumes_there_and_scores_as_an_uninterrupted_one(
    pytester: pytest.Pytester, shapes_dir: Path
) -> None:
    args = [*TINY_DETR, *FAST, "--rf100vl-train-option", "epochs=3", "--rf100vl-train", "train",
            f"--rf100vl-data-option=data-dir={shapes_dir}"]
    whole = pytester.path / "whole"
    pytester.runpytest(*args, f"--rf100vl-results={whole}").assert_outcomes(passed=1)

    folder = pytester.path / "killed"
    process = subprocess.Popen([sys.executable, "-m", "pytest", *args, f"--rf100vl-results={folder}"],
                               cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _watch_and_kill(process, folder / "trained", time.monotonic() + 240)
    assert process.wait(60) == -9 and not (folder / "results.jsonl").exists()
    pytester.runpytest(*args, f"--rf100vl-results={folder}").assert_outcomes(passed=1)
    resumed, uninterrupted = _row(folder), _row(whole)
    assert resumed["train_resumed_after_epoch"] == 1 and uninterrupted["train_resumed_after_epoch"] is None
    assert resumed["weights_sha256"] == uninterrupted["weights_sha256"]
    assert resumed["ap"] == uninterrupted["ap"] and resumed["train_steps"] == uninterrupted["train_steps"]


def test_three_seeds_give_three_rows_and_both_spreads_over_seeds(pytester: pytest.Pytester, shapes_dir: Path) -> None:
    folder = pytester.path / "results"
    result = pytester.runpytest(*TINY_DETR, *FAST, "--rf100vl-train-option", "epochs=1", "--rf100vl-train",
                                "fewshot_10", "--override-ini", "rf100vl_seeds=0-2", "--rf100vl-train-option", "federated=true",
                                f"--rf100vl-data-option=data-dir={shapes_dir}", f"--rf100vl-results={folder}", "-v")
    result.assert_outcomes(passed=3)
    rows = results(folder)
    assert sorted(row["seed"] for row in rows) == [0, 1, 2] and len({row["weights_sha256"] for row in rows}) == 3
    assert all(json.loads(row["hyperparameters"])["federated"] is True for row in rows)
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "std of the mean (Table 8)" in summary and "mean of the std (Table 9)" in summary
    spread = summary[summary.index("### Spread over seeds"):]  # the errors table above has an All row too
    line = next(line for line in spread.splitlines() if line.startswith("| All |"))
    seeds, datasets, *figures = [cell.strip() for cell in line.strip("|").split("|")][1:]
    assert (seeds, datasets) == ("3", "1") and all(figure != "—" for figure in figures)
    result.stdout.fnmatch_lines(["*test_detection?rt-detrv2:tiny-shapes-seed2?*"])  # one test per seed


def test_stac_labels_the_rest_of_train_with_its_teachers_f1_threshold(pytester: pytest.Pytester,
                                                                      shapes_dir: Path) -> None:
    folder = pytester.path / "results"
    pytester.runpytest(*TINY_DETR, *FAST, "--rf100vl-train", "semisup_10", "--override-ini", "rf100vl_recipe=stac",
                       "--rf100vl-train-option", "epochs=2", "--rf100vl-train-option", "student_epochs=1",
                       f"--rf100vl-data-option=data-dir={shapes_dir}", f"--rf100vl-results={folder}").assert_outcomes(passed=1)
    row = _row(folder)
    details = json.loads(row["train_details"])
    assert row["regime"] == "semi-supervised" and row["recipe"] == "stac"
    assert set(details) == {"teacher_steps", "teacher_train_s", "threshold", "teacher_f1", "pseudo_boxes"}
    assert details["teacher_steps"] == 2 * 2  # 5 labelled images, batches of 4


def test_a_model_that_cannot_be_fine_tuned_is_left_out_and_seeds_need_training(
    pytester: pytest.Pytester, small_sample: Path, data_dir: Path
) -> None:
    link(data_dir, "small", small_sample)
    base = ["--rf100vl-model", "oracle", "--rf100vl-dataset", "small", f"--rf100vl-data-option=data-dir={data_dir}",
            "-p", "no:cacheprovider"]
    result = pytester.runpytest(*base, "--rf100vl-train", "train", "--override-ini=rf100vl_allow_empty=true")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*oracle cannot be fine-tuned (it has no recipe)*"])
    refused = pytester.runpytest(*base, "--override-ini", "rf100vl_seeds=0-2")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*training.seeds: seeds are for fine-tuning; add --rf100vl-train SPLIT*"])


@pytest.mark.parametrize(("seeds", "message"), [
    ("5-2", "empty seed range '5-2' (write the lower seed first: 2-5)"),
    ("0-100000", "holds more than 100 seeds"),
    ("0-1000000000000", "seed 1000000000000 is too large"),
    ("٣", "expected seeds such as 0-9"),  # a digit, but not an ASCII one
])
def test_seeds_out_of_reason_are_a_usage_error_at_once(pytester: pytest.Pytester, small_sample: Path,
                                                       data_dir: Path, seeds: str, message: str) -> None:
    link(data_dir, "small", small_sample)
    started = time.monotonic()
    refused = pytester.runpytest("--rf100vl-model", "rt-detrv2:tiny", "--rf100vl-dataset", "small",
                                 f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-train", "train",
                                 "--override-ini", f"rf100vl_seeds={seeds}", "-p", "no:cacheprovider")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR and time.monotonic() - started < 30
    assert message in refused.stderr.str()


def test_a_train_split_with_no_box_is_a_clear_error_of_its_pair(pytester: pytest.Pytester, data_dir: Path,
                                                                 tmp_path: Path) -> None:
    from rf100vl_hf.sample import write_sample_export

    export = write_sample_export(tmp_path / "boxless", sizes={"train": 8, "valid": 8, "test": 8})
    path = export / "train" / "_annotations.coco.json"
    coco = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**coco, "annotations": []}), encoding="utf-8")
    link(data_dir, "boxless", export)
    result = pytester.runpytest(*TINY_DETR[:2], "--rf100vl-dataset", "boxless", "--rf100vl-device", "cpu",
                                f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-train", "train", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*boxless: the train split has no box to learn from (8 images without annotations)*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize("module, adapter", [("yolo", "YoloAdapter"), ("rfdetr_extra", "RfDetrPackageAdapter")])
def test_a_hyperparameter_another_librarys_trainer_has_not_is_refused_rather_than_recorded(module: str,
                                                                                          adapter: str) -> None:
    import importlib

    from pytest_rf100vl.adapters.rt_detr import RTDetrV2Adapter
    from pytest_rf100vl.core.training_plan import plan

    cls = getattr(importlib.import_module(f"pytest_rf100vl.adapters.{module}"), adapter)
    with pytest.raises(ValueError, match=rf"adapter '{cls.name}' trains with its own library's trainer, which has "
                                         r"no flip, warmup_steps \(its recipe '\w+' sets: batch_size, "):
        plan(cls.entry(), "train", None, {"flip": "0.5", "warmup_steps": "3", "epochs": "2"}, 0)
    own_key, own_value = next(iter(cls.recipes[cls.default_recipes["fully-supervised"]].extra.items()))
    kept = plan(cls.entry(), "train", None, {"epochs": "2", "seed": "4", own_key: str(own_value)}, None)
    assert (kept.recipe.epochs, kept.recipe.seed, kept.recipe.extra[own_key]) == (2, 4, own_value)
    # the project's own loop takes every field
    flipped = plan(RTDetrV2Adapter.entry(), "train", None, {"flip": "0.5", "warmup_steps": "3"}, 0)
    assert flipped.recipe.hyperparameters()["flip"] == 0.5 and flipped.recipe.warmup_steps == 3
