"""What an adapter is told about a dataset, per prompt mode, on the embedded sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_rf100vl.adapters.base import Adapter
from pytest_rf100vl.kinds.rf100vl.split import DetectionSplit
from pytest_rf100vl.kinds.rf100vl.tasks import detection_task


class Listener(Adapter):
    name = "listener"
    prompt_modes = ("names", "instructions", "fewshot")

    def predict(self, batch):
        raise AssertionError("not called")


class Cheater(Listener):
    name = "cheater"
    needs_ground_truth = True


@pytest.fixture(scope="module")
def sample(sample_root: Path, tmp_path_factory: pytest.TempPathFactory):
    from rf100vl_hf.metadata import read_metadata
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    splits = load_rf100vl("sample", data_dir=sample_root, cache_dir=tmp_path_factory.mktemp("cache"), progress=False)
    return splits, read_metadata(splits)


def test_names_mode_tells_classes_ids_and_image_ids_but_not_the_answers(sample) -> None:
    splits, metadata = sample
    task = detection_task(splits["test"], metadata, "test", "names", splits.__getitem__)
    assert (task.dataset, task.classes, task.category_ids) == ("sample", ["circle", "square", "triangle"], (1, 2, 3))
    assert task.image_ids == tuple(splits["test"]["image_id"])
    assert (task.ground_truth, task.instructions, task.fewshot) == (None, {}, ())


def test_instructions_mode_joins_description_and_instructions(sample) -> None:
    splits, metadata = sample
    task = detection_task(splits["test"], metadata, "test", "instructions", splits.__getitem__)
    assert set(task.instructions) == {"circle", "square", "triangle"}
    assert task.instructions["circle"].startswith("A filled red disc, of any size, on a noisy background. ")
    assert "Draw a tight box around the whole disc." in task.instructions["circle"]


def test_fewshot_mode_decodes_the_fewshot_split_with_xyxy_boxes(sample) -> None:
    splits, metadata = sample
    fewshot = splits[metadata["fewshot"]["split"]]
    task = detection_task(splits["test"], metadata, "test", "fewshot", splits.__getitem__)
    assert len(task.fewshot) == len(fewshot) > 0
    for example, row in zip(task.fewshot, fewshot):
        assert example.image.mode == "RGB" and example.image.size == (row["width"], row["height"])
        xywh = np.asarray(row["objects"]["bbox"]).reshape(-1, 4)
        np.testing.assert_allclose(example.boxes, np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1))
        np.testing.assert_array_equal(example.labels, row["objects"]["category"])


def test_only_an_adapter_that_needs_it_gets_the_ground_truth(sample) -> None:
    splits, _ = sample
    test = splits["test"]
    split = DetectionSplit.of(splits, "test", "names")
    assert split.task_for(Listener).ground_truth is None
    task = split.task_for(Cheater)
    assert sorted(task.ground_truth) == sorted(test["image_id"])
    for row in test:
        truth = task.ground_truth[row["image_id"]]
        assert len(truth.boxes) == len(row["objects"]["bbox"])
        np.testing.assert_array_equal(truth.labels, row["objects"]["category"])
        np.testing.assert_array_equal(truth.scores, np.ones(len(truth.labels)))
