"""The optional ``yolo`` extra: without it, asking for a YOLO model says what to install; with
it, ultralytics' import-time patches do not reach the rest of the run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def test_a_yolo_model_without_ultralytics_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_rf100vl.adapters.yolo import YoloAdapter

    monkeypatch.setitem(sys.modules, "ultralytics", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r"needs ultralytics, an optional extra \(AGPL-3.0\): "
                                          r"pip install 'rf100vl-hf\[yolo\]'"):
        YoloAdapter("tiny")


@pytest.mark.skipif(importlib.util.find_spec("ultralytics") is None,
                    reason="the optional yolo extra (ultralytics) is not installed")
def test_ultralytics_leaves_image_reading_and_saving_as_they_were(tmp_path: Path) -> None:
    import numpy as np
    import PIL.Image
    import torch

    from pytest_rf100vl.adapters.yolo import YoloAdapter

    opener, saver, printing = PIL.Image.open, torch.save, np.get_printoptions()
    YoloAdapter("tiny")
    assert PIL.Image.open is opener and torch.save is saver and np.get_printoptions() == printing
    (tmp_path / "broken.jpg").write_bytes(b"not an image")
    with pytest.raises(PIL.UnidentifiedImageError):  # not an attempt to install a HEIF plugin
        PIL.Image.open(tmp_path / "broken.jpg")


def test_the_split_is_written_as_an_ultralytics_dataset_with_the_class_names_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np
    from PIL import Image

    from pytest_rf100vl.adapters.yolo import write_dataset
    from rf100vl_hf.training.samples import Sample

    yaml = pytest.importorskip("yaml", reason="PyYAML comes with the yolo extra")
    monkeypatch.chdir(tmp_path)
    image = Image.new("RGB", (200, 100))
    train = [Sample(image, np.array([[0.0, 0.0, 100.0, 50.0], [10.0, 10.0, 10.0, 20.0]]), np.array([1, 0]))]
    names = ["it's", 'a "quoted" \\ name', "naïve: yes", "7"]
    data = yaml.safe_load(write_dataset(train, train[:0], names, Path("relative")).read_text("utf-8"))
    assert data["names"] == dict(enumerate(names)) and Path(data["path"]).is_absolute()
    labels = (Path("relative") / "labels" / "train" / "000000.txt").read_text().splitlines()
    assert labels == ["1 0.250000 0.250000 0.500000 0.500000"]  # the zero-width box is left out
    assert (Path("relative") / "images" / "train" / "000000.jpg").is_file()
