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
