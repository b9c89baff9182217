"""YOLO through ultralytics (the optional ``yolo`` extra), fine-tuned in the matrix: trained on
the split written on the fly, scored by the plugin's metric beside ultralytics' own mAP, its
weights reused on a rerun, and a fit killed after its first epoch resumed from the store.

Every run is a subprocess: ultralytics loads extension modules (OpenCV, numpy.fft, torch's
operator libraries) that cannot be imported twice in one process, and pytester forgets what an
in-process run imported."""

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

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ultralytics") is None,
                                reason="the optional yolo extra (ultralytics) is not installed")

ARGS = ["--rf100vl-model", "yolo:tiny", "--rf100vl-dataset", "shapes", "--rf100vl-device", "cpu",
        "--rf100vl-adapter-option", "imgsz=64", "--rf100vl-train", "train", "--rf100vl-train-option", "batch_size=8",
        "--benchmark-disable", "-p", "no:cacheprovider"]


@pytest.fixture
def shapes_dir(data_dir: Path, tmp_path: Path) -> Path:
    link(data_dir, "shapes", write_shapes_export(tmp_path / "shapes"))
    return data_dir


COUNT_FITS = """
from pathlib import Path

from pytest_rf100vl.adapters.yolo import YoloAdapter

fit = YoloAdapter.fit


def counted(self, *args):
    with open(Path(__file__).parent / "fits.txt", "a") as handle:
        handle.write("fit\\n")
    return fit(self, *args)


YoloAdapter.fit = counted
"""


def test_yolo_trains_on_the_split_and_reports_ultralytics_own_map_beside_ours(pytester: pytest.Pytester,
                                                                             shapes_dir: Path) -> None:
    pytester.makeconftest(COUNT_FITS)  # the runs are subprocesses, so the count is kept in a file
    args = [*ARGS, "--rf100vl-train-option", "epochs=2", f"--rf100vl-data-option=data-dir={shapes_dir}"]
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    folder = pytester.path / ".rf100vl" / "results"
    (row,) = results(folder)
    assert row["regime"] == "fully-supervised" and row["recipe"] == "ultralytics" and row["train_epochs"] == 2
    assert 0 <= row["ultralytics_val_map50_95"] <= 100 and row["train_steps"] == 2 * 6 and row["weights_sha256"]
    assert set(json.loads(row["train_losses"])) >= {"loss", "box_loss", "cls_loss", "dfl_loss"}
    (key,) = (folder / "trained").rglob("key.json")
    assert set(json.loads(key.read_text())["versions"]) == {"torch", "ultralytics", "rf100vl-hf"}
    pytester.runpytest_subprocess(*args, "--rf100vl-rerun").assert_outcomes(passed=1)
    again = results(folder)[-1]
    assert (pytester.path / "fits.txt").read_text().split() == ["fit"]
    assert again["weights_reused"] is True and again["ap"] == row["ap"]
    assert again["ultralytics_val_map50_95"] == row["ultralytics_val_map50_95"]


def test_a_yolo_fit_killed_after_its_first_epoch_resumes_from_the_store(pytester: pytest.Pytester,
                                                                        shapes_dir: Path) -> None:
    args = [*ARGS, "--rf100vl-train-option", "epochs=3", f"--rf100vl-data-option=data-dir={shapes_dir}"]
    folder = pytester.path / "results"
    process = subprocess.Popen([sys.executable, "-m", "pytest", *args, f"--rf100vl-results={folder}"],
                               cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _watch_and_kill(process, folder / "trained", time.monotonic() + 240)
    assert process.wait(60) == -9
    pytester.runpytest_subprocess(*args, f"--rf100vl-results={folder}").assert_outcomes(passed=1)
    (row,) = results(folder)
    assert row["train_resumed_after_epoch"] in (1, 2) and row["train_epochs"] == 3 and row["weights_sha256"]


COUNT_MASKS = """
from pathlib import Path

from pytest_rf100vl.adapters.yolo import MaskedBCE

forward = MaskedBCE.forward


def counted(self, logits, targets):
    with open(Path(__file__).parent / "masks.txt", "a") as handle:
        handle.write(f"{list(self.mask.shape)}|{list(logits.shape)}\\n")
    return forward(self, logits, targets)


MaskedBCE.forward = counted
"""


def _on(model: str, args: list[str]) -> list[str]:
    return [model if arg == "yolo:tiny" else arg for arg in args]


@pytest.mark.parametrize(("model", "branches", "l1_or_dfl"),
                         [("yolo:tiny", 1, "dfl_loss"), ("yolo:tiny26", 2, "l1_loss")])
def test_a_federated_yolo_fit_masks_every_batchs_classification_loss(pytester: pytest.Pytester, shapes_dir: Path,
                                                                    model: str, branches: int, l1_or_dfl: str) -> None:
    """YOLO26's loss scores classes twice, in its one-to-many and one-to-one branches: both are masked."""
    pytester.makeconftest(COUNT_MASKS)
    pytester.runpytest_subprocess(*_on(model, ARGS), "--rf100vl-train-option", "epochs=1", "--rf100vl-train-option",
                                  "federated=true", f"--rf100vl-data-option=data-dir={shapes_dir}",
                                  "--rf100vl-results=relative/results",  # a relative folder too
                                  ).assert_outcomes(passed=1)
    (row,) = results(pytester.path / "relative" / "results")
    assert json.loads(row["hyperparameters"])["federated"] is True
    assert set(json.loads(row["train_losses"])) == {"loss", "box_loss", "cls_loss", l1_or_dfl}
    masks = (pytester.path / "masks.txt").read_text().splitlines()
    assert len(masks) == 6 * branches  # each branch once per batch: 48 images in batches of 8
    mask, logits = (json.loads(shape) for shape in masks[0].split("|"))
    assert mask == [8, 2] and logits[0] == 8 and logits[2] == 2  # (images, classes) against (images, anchors, classes)


def test_yolo26_stac_with_the_federated_loss_and_its_one_to_one_head(pytester: pytest.Pytester,
                                                                     shapes_dir: Path) -> None:
    pytester.makeconftest(COUNT_MASKS)
    args = [arg if arg != "train" else "semisup_10" for arg in _on("yolo:tiny26", ARGS)]
    pytester.runpytest_subprocess(*args, "--override-ini", "rf100vl_recipe=stac", "--rf100vl-train-option", "epochs=1",
                                  "--rf100vl-train-option", "student_epochs=1", "--rf100vl-train-option",
                                  "federated=true", "--rf100vl-adapter-option", "end2end=true",
                                  f"--rf100vl-data-option=data-dir={shapes_dir}").assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    details = json.loads(row["train_details"])
    assert row["recipe"] == "stac" and json.loads(row["adapter_options"])["end2end"] is True
    assert details["teacher_steps"] == 1 and row["train_steps"] == 6 and 0 <= details["ultralytics_val_map50_95"] <= 100
    assert len((pytester.path / "masks.txt").read_text().splitlines()) == 2 * (1 + 6)  # teacher and student batches


def test_yolo_stac_trains_a_teacher_then_a_student_on_its_pseudo_labels(pytester: pytest.Pytester,
                                                                       shapes_dir: Path) -> None:
    args = [arg if arg != "train" else "semisup_10" for arg in ARGS]
    pytester.runpytest_subprocess(*args, "--override-ini", "rf100vl_recipe=stac", "--rf100vl-train-option",
                                  "epochs=1", "--rf100vl-train-option", "student_epochs=1",
                                  f"--rf100vl-data-option=data-dir={shapes_dir}").assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    details = json.loads(row["train_details"])
    assert row["regime"] == "semi-supervised" and row["recipe"] == "stac" and row["train_split"] == "semisup_10"
    assert {"teacher_steps", "threshold", "teacher_f1", "pseudo_boxes", "ultralytics_val_map50_95"} <= set(details)
    assert details["teacher_steps"] == 1 and row["train_steps"] == 6  # 5 labelled; 5 + 43 pseudo-labelled


def test_what_ultralytics_cannot_do_is_refused_by_name(pytester: pytest.Pytester, shapes_dir: Path) -> None:
    result = pytester.runpytest_subprocess(*ARGS, "--rf100vl-train-option", "max_grad_norm=1",
                                           f"--rf100vl-data-option=data-dir={shapes_dir}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ultralytics clips gradients at 10: max_grad_norm cannot be 1.0*"])


def test_the_federated_bce_drops_exactly_the_classes_an_image_does_not_annotate() -> None:
    import torch

    from rf100vl_hf.training.federated import federated_mask

    from pytest_rf100vl.adapters.yolo import MaskedBCE, batch_labels

    labels = batch_labels(torch.tensor([0.0, 0.0, 2.0]), torch.tensor([[1.0], [3.0], [0.0]]), images=3)
    assert labels == [[1, 3], [], [0]]
    bce = MaskedBCE()
    logits = torch.randn(3, 5, 4, requires_grad=True)
    targets = torch.rand(3, 5, 4)
    plain = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    assert torch.equal(bce(logits, targets), plain)  # no mask: ultralytics' own BCE
    bce.mask = torch.from_numpy(federated_mask(labels, 4))
    loss = bce(logits, targets)
    loss.sum().backward()
    kept = torch.zeros(3, 4, dtype=torch.bool)
    kept[0, 1] = kept[0, 3] = kept[2, 0] = True
    for image in range(3):
        for cls in range(4):
            values, grads = loss[image, :, cls], logits.grad[image, :, cls]
            if kept[image, cls]:
                assert torch.equal(values, plain[image, :, cls]) and grads.abs().sum() > 0
            else:
                assert not values.any() and not grads.any()
