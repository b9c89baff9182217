"""YOLO-E, YOLO-World and LLMDet (the specialists of the DetPO board) run as pairs of the
matrix, offline (``:tiny``), in one subprocess as ``test_yolo.py`` explains (the YOLOs' prompts
are tested in ``tests/adapters/test_yolo_prompted.py``)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.plugin.helpers import link, results
from tests.support.shapes_export import write_shapes_export

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ultralytics") is None,
                                reason="the optional yolo extra (ultralytics) is not installed")


def test_tiny_yoloe_yolo_world_and_llmdet_pairs_run_offline(
        pytester: pytest.Pytester, data_dir: Path, tmp_path: Path) -> None:
    link(data_dir, "shapes", write_shapes_export(tmp_path / "shapes"))
    common = ["--rf100vl-dataset", "shapes", "--rf100vl-device", "cpu", "--rf100vl-adapter-option", "yoloe.imgsz=64",
              "--rf100vl-adapter-option", "yolo-world.imgsz=64",
              f"--rf100vl-data-option=data-dir={data_dir}", "--benchmark-disable", "-p", "no:cacheprovider"]
    pytester.runpytest_subprocess("--rf100vl-model", "yoloe:tiny", "--rf100vl-model", "yolo-world:tiny",
                                  "--rf100vl-model", "llmdet:tiny", *common).assert_outcomes(passed=3)
    rows = {(row["model"], row["prompt"]): row for row in results(pytester.path / ".rf100vl" / "results")}
    assert set(rows) == {("yoloe", "names"), ("yolo-world", "names"), ("llmdet", "names")}
    for row in rows.values():
        assert row["smoke"] is True and 0 <= row["ap"] <= 100 and row["n_images"] > 0
    for model in ("yoloe", "yolo-world"):
        assert json.loads(rows[model, "names"]["adapter_options"])["agnostic_nms"] is True
    assert rows["yoloe", "names"]["model_revision"] == "ultralytics:yoloe-11n.yaml"
