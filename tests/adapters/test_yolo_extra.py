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

    from rf100vl_hf.training.samples import Sample

    from pytest_rf100vl.adapters.yolo import write_dataset

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


PROBE = """
import json

import numpy as np
import torch
from PIL import Image

from pytest_rf100vl.adapters.base import DetectionTask, ImageItem
from pytest_rf100vl.adapters.yolo import YoloAdapter


def rows(found):
    return np.column_stack([found.boxes, found.scores, found.labels]).tolist()


def varied(adapter):  # features that differ by place, so that scores differ by anchor and class (He init)
    torch.manual_seed(2)
    for module in adapter.model.model.modules():
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight)
    adapter.model.predictor = None


image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8))
item = ImageItem(image, 1, "noise.png")
out = {}

adapter = YoloAdapter("tiny26", imgsz=128, conf=0.0, end2end=True)
adapter.set_task(DetectionTask("noise", ["a", "b", "c"]))
varied(adapter)
(found,) = adapter.predict([item])
module = adapter.model.predictor.model  # the module ultralytics predicted with (conv and norm fused)
with torch.no_grad():
    head = module(torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)[None].float() / 255)[0][0]
head[:, :4] = head[:, :4].clamp(0, 128)  # ultralytics clips boxes to the image
out["end2end"] = {"adapter": rows(found), "head": head.tolist()}

torch.manual_seed(1)  # the same random backbone for both
switched = YoloAdapter("tiny", imgsz=128, conf=0.0)
switched.set_task(DetectionTask("five", list("abcde")))
switched.predict([item])
switched.set_task(DetectionTask("two", ["a", "b"]))
torch.manual_seed(1)
fresh = YoloAdapter("tiny", imgsz=128, conf=0.0)
fresh.set_task(DetectionTask("two", ["a", "b"]))
out["switch"] = {"switched": rows(switched.predict([item])[0]), "fresh": rows(fresh.predict([item])[0])}

try:
    YoloAdapter("tiny", end2end=True)
except ValueError as error:
    out["refused"] = str(error)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe() -> dict:
    """What the adapter and ultralytics' own module answer on one image, from a fresh interpreter
    (ultralytics' extension modules cannot be imported twice in one process)."""
    import json
    import os
    import subprocess

    if importlib.util.find_spec("ultralytics") is None:
        pytest.skip("the optional yolo extra (ultralytics) is not installed")
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_yolo26_end2end_answers_are_its_one_to_one_heads_top_k_unchanged(probe: dict) -> None:
    import numpy as np

    found, head = (np.array(probe["end2end"][key]) for key in ("adapter", "head"))
    assert len(found) == len(head) == 336  # every anchor of a 128 px image (16x16 + 8x8 + 4x4): no NMS
    assert len(np.unique(found[:, :4], axis=0)) > 100 and len(np.unique(found[:, 4])) > 100  # not all alike
    assert set(found[:, 5]) == {0, 1, 2}
    np.testing.assert_array_equal(found[:, 5], head[:, 5])  # the same classes, in the same order
    np.testing.assert_allclose(found[:, :5], head[:, :5], rtol=1e-6, atol=1e-4)  # boxes scaled to the image's pixels


def test_a_new_class_list_predicts_with_its_own_head_not_the_previous_one(probe: dict) -> None:
    import numpy as np

    switched, fresh = (np.array(probe["switch"][key]) for key in ("switched", "fresh"))
    assert len(fresh) and set(fresh[:, 5]) <= {0, 1}
    np.testing.assert_array_equal(switched, fresh)


def test_end2end_on_a_model_without_a_one_to_one_head_is_refused_by_name(probe: dict) -> None:
    assert probe["refused"] == ("adapter option end2end=true needs a model with a one-to-one head (YOLO26, YOLOv10); "
                                "tiny has none: leave end2end at false")
