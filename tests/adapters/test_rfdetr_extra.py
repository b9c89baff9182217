"""The optional ``rfdetr`` extra: without it, asking for an RF-DETR model through Roboflow's own
package says what to install; the split it trains on is written as the Roboflow COCO export
rfdetr reads, with the task's class indices as its labels."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest


def test_an_rfdetr_model_without_the_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_rf100vl.adapters.rfdetr_extra import RfDetrPackageAdapter

    monkeypatch.setitem(sys.modules, "rfdetr", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"needs Roboflow's rfdetr package, an optional extra: "
                                          r"pip install 'rf100vl-hf\[rfdetr\]'"):
        RfDetrPackageAdapter("tiny")


def test_a_checkpoint_that_is_no_size_and_no_file_is_refused_by_name(tmp_path: Path) -> None:
    from pytest_rf100vl.adapters.rfdetr_extra import RfDetrPackageAdapter

    with pytest.raises(ValueError, match=r"rfdetr checkpoint 'huge' is neither a size \(nano, small, medium, large\), "
                                         r"'tiny', nor a checkpoint file"):
        RfDetrPackageAdapter("huge")
    with pytest.raises(ValueError, match="predicts in float32 only, not bfloat16: pass --rf100vl-dtype float32"):
        RfDetrPackageAdapter("tiny", dtype="bfloat16")


def test_the_split_is_written_as_a_roboflow_coco_export_labelled_by_class_index(tmp_path: Path) -> None:
    from PIL import Image

    from rf100vl_hf.training.samples import Sample

    from pytest_rf100vl.adapters.rfdetr_extra import write_coco_export

    train = [Sample(Image.new("RGB", (200, 100)), np.array([[0.0, 0.0, 100.0, 50.0], [10.0, 10.0, 10.0, 20.0],
                                                            [20.0, 30.0, 60.0, 90.0]]), np.array([1, 0, 2]))]
    names = ["it's", 'a "quoted" name', "7"]
    write_coco_export(train, train[:0], names, tmp_path)
    data = json.loads((tmp_path / "train" / "_annotations.coco.json").read_text("utf-8"))
    assert data["categories"] == [{"id": i, "name": name, "supercategory": "none"} for i, name in enumerate(names)]
    assert [(a["category_id"], a["bbox"], a["area"]) for a in data["annotations"]] == [
        (1, [0.0, 0.0, 100.0, 50.0], 5000.0), (2, [20.0, 30.0, 40.0, 60.0], 2400.0)]  # the zero-width box is left out
    assert data["images"] == [{"id": 0, "file_name": "000000.jpg", "width": 200, "height": 100}]
    assert (tmp_path / "train" / "000000.jpg").is_file()
    assert json.loads((tmp_path / "valid" / "_annotations.coco.json").read_text("utf-8"))["images"] == []

    if importlib.util.find_spec("rfdetr") is not None:  # rfdetr's own reading gives the same labels
        from pytest_rf100vl.adapters.rfdetr_extra import _import_rfdetr

        _import_rfdetr()  # keeps the process's float32 matmul precision as it was
        from rfdetr.datasets.coco import filter_parent_categories

        kept = filter_parent_categories(data["categories"], {a["category_id"] for a in data["annotations"]})
        assert [category["name"] for category in kept] == names


@pytest.mark.parametrize(("device", "trainer"), [("cpu", {"accelerator": "cpu", "devices": 1}),
                                                  ("cuda", {"accelerator": "gpu", "devices": 1}),
                                                  ("cuda:3", {"accelerator": "gpu", "devices": [3]}),
                                                  ("mps", {"accelerator": "mps", "devices": 1})])
def test_the_fit_runs_on_the_pairs_device(device: str, trainer: dict) -> None:
    from pytest_rf100vl.adapters.rfdetr_extra import _accelerator

    assert _accelerator(device) == trainer
