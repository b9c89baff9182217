"""RF-DETR through Roboflow's own ``rfdetr`` package (the optional ``rfdetr`` extra), fine-tuned in
the matrix by rfdetr's trainer: trained on the split written on the fly, its weights reused on a
rerun, a fit killed after its first epoch resumed from the store. Skipped without the extra (it
is not part of ``test``: PyTorch Lightning's stack trains in minutes, not seconds, on a CPU).

Every run is a subprocess, as for ultralytics: rfdetr sets process-wide state when imported."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugin.helpers import link, results
from tests.plugin.test_training import _watch_and_kill
from tests.support.shapes_export import write_shapes_export

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfdetr") is None,
                                reason="the optional rfdetr extra (Roboflow's rfdetr package) is not installed")

ARGS = ["--rf100vl-model", "rfdetr:tiny", "--rf100vl-dataset", "shapes", "--rf100vl-device", "cpu",
        "--rf100vl-train", "train", "--rf100vl-train-option", "multi_scale=false", "--benchmark-disable",
        "-p", "no:cacheprovider"]

COUNT_FITS = """
from pathlib import Path

from pytest_rf100vl.adapters.rfdetr_extra import RfDetrPackageAdapter

fit = RfDetrPackageAdapter.fit


def counted(self, *args):
    with open(Path(__file__).parent / "fits.txt", "a") as handle:
        handle.write("fit\\n")
    return fit(self, *args)


RfDetrPackageAdapter.fit = counted
"""


@pytest.fixture
def shapes_dir(data_dir: Path, tmp_path: Path) -> Path:
    """Four training images: one step of the default batch of 4 an epoch."""
    link(data_dir, "shapes", write_shapes_export(tmp_path / "shapes", sizes={"train": 4, "valid": 2, "test": 2}))
    return data_dir


def test_rfdetr_trains_on_the_split_with_its_own_trainer_and_a_rerun_reuses_the_weights(
    pytester: pytest.Pytester, shapes_dir: Path
) -> None:
    pytester.makeconftest(COUNT_FITS)
    args = [*ARGS, "--rf100vl-train-option", "epochs=1", f"--rf100vl-data-option=data-dir={shapes_dir}"]
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    folder = pytester.path / ".rf100vl" / "results"
    (row,) = results(folder)
    hyper = json.loads(row["hyperparameters"])
    assert row["recipe"] == "rfdetr" and row["train_epochs"] == 1 and row["train_steps"] == 1 and row["weights_sha256"]
    assert (hyper["batch_size"], hyper["grad_accumulation"], hyper["learning_rate"], hyper["lr_encoder"]) == (
        4, 4, 1e-4, 1.5e-4)
    assert 0 <= row["rfdetr_val_map50_95"] <= 100 and row["answer_counts"]["background_slot"] >= 0
    assert set(json.loads(row["train_losses"])) >= {"loss", "loss_ce", "loss_bbox", "loss_giou"}
    (key,) = (folder / "trained").rglob("key.json")
    assert set(json.loads(key.read_text())["versions"]) == {"torch", "transformers", "rfdetr", "rf100vl-hf"}
    assert sorted(path.name for path in key.parent.iterdir()) == ["key.json", "trained.json", "weights.pt"]
    pytester.runpytest_subprocess(*args, "--rf100vl-rerun").assert_outcomes(passed=1)
    again = results(folder)[-1]
    assert (pytester.path / "fits.txt").read_text().split() == ["fit"]
    assert again["weights_reused"] is True and again["ap"] == row["ap"]
    assert again["rfdetr_val_map50_95"] == row["rfdetr_val_map50_95"]


def test_an_rfdetr_fit_killed_after_its_first_epoch_resumes_from_the_store(pytester: pytest.Pytester,
                                                                          shapes_dir: Path) -> None:
    args = [*ARGS, "--rf100vl-train-option", "epochs=2", f"--rf100vl-data-option=data-dir={shapes_dir}"]
    folder = pytester.path / "results"
    process = subprocess.Popen([sys.executable, "-m", "pytest", *args, f"--rf100vl-results={folder}"],
                               cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _watch_and_kill(process, folder / "trained", time.monotonic() + 600)
    assert process.wait(60) == -9
    pytester.runpytest_subprocess(*args, f"--rf100vl-results={folder}").assert_outcomes(passed=1)
    (row,) = results(folder)
    assert row["train_resumed_after_epoch"] == 1 and row["train_epochs"] == 2 and row["weights_sha256"]


def test_what_rfdetrs_trainer_cannot_do_is_refused_by_name(pytester: pytest.Pytester, shapes_dir: Path) -> None:
    result = pytester.runpytest_subprocess(*ARGS, "--rf100vl-train-option", "federated=true",
                                           f"--rf100vl-data-option=data-dir={shapes_dir}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*recipe 'rfdetr': rfdetr's loss has no federated form: leave federated at false*"])
