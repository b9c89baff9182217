"""A served pair scores exactly what pycocotools gives the boxes the server returned.

The plugin runs ``openai`` (every coordinate convention) and ``gemini`` against the stand-in
servers on the embedded sample's test split (images of several shapes, none square, and the
sample's quirks). The stand-in answers each image with boxes near its ground truth, written in
the convention's numbers (whole numbers where models write them) by the tests' own arithmetic
(``tests/adapters/served.py``); the test reads those numbers back to pixels the same way and
scores them with pycocotools directly (``tests/support/coco_reference.py``). The row's AP
must equal that to 1e-9."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from tests.adapters.served import read_back, written
from tests.support.coco_reference import precision_ap, pycocotools_eval
from tests.support.model_servers import Received, serve_gemini, serve_openai

WHOLE = {"qwen2.5", "qwen3", "gemini", "pixels"}
"""Conventions whose numbers models write as integers."""


@pytest.fixture(scope="module")
def sample_split() -> Any:
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    return load_rf100vl("sample", split="test", progress=False)


def near(box: list[float], width: int, height: int) -> tuple[float, ...]:
    """A prediction near a ground-truth ``xywh`` box: moved and shrunk a little, inside the image."""
    x, y, w, h = box
    x1, y1 = min(width, x + 0.08 * w), min(height, y + 0.05 * h)
    return (x1, y1, min(width, x1 + 0.9 * w), min(height, y1 + 0.95 * h))


def scripted(split: Any, convention: str) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """The stand-in's script, the predictions it means (read back by the test), and the ground truth."""
    import datasets

    from rf100vl_hf.images import open_rgb
    from rf100vl_hf.metadata import read_metadata

    meta = read_metadata(split)
    classes, category_ids = meta["classes"], meta["category_ids"]
    rows = split.cast_column("image", datasets.Image(decode=False))
    images, annotations, predictions, by_pixels = [], [], [], []
    for row in rows:
        pixels = np.asarray(open_rgb(row["image"]["bytes"]), dtype=np.int16)
        height, width = pixels.shape[:2]
        images.append({"id": row["image_id"], "width": width, "height": height})
        answer = []
        for box, category, area, crowd in zip(row["objects"]["bbox"], row["objects"]["category"],
                                              row["objects"]["area"], row["objects"]["iscrowd"]):
            annotations.append({"id": len(annotations) + 1, "image_id": row["image_id"], "bbox": box, "area": area,
                                "iscrowd": crowd, "category_id": category_ids[category]})
            numbers = written(convention, near(box, width, height), (width, height))
            numbers = [round(v) for v in numbers] if convention in WHOLE else [round(v, 6) for v in numbers]
            x1, y1, x2, y2 = read_back(convention, numbers, (width, height))
            predictions.append({"image_id": row["image_id"], "category_id": category_ids[category],
                                "bbox": [min(x1, x2), min(y1, y2), abs(x2 - x1), abs(y2 - y1)], "score": 1.0})
            key = "box_2d" if convention == "gemini" else "bbox_2d"
            answer.append({key: numbers, "label": classes[category]})
        by_pixels.append((pixels, json.dumps(answer)))

    def answer(received: Received) -> str:  # the image is found by its pixels (some are re-encoded to be sent)
        seen = np.asarray(received.image.convert("RGB"), dtype=np.int16)
        return min((p for p in by_pixels if p[0].shape == seen.shape), key=lambda p: np.abs(p[0] - seen).mean())[1]

    truth = {"images": images, "annotations": annotations, "categories": [{"id": i} for i in category_ids]}
    return answer, predictions, truth


@pytest.mark.parametrize(
    ("adapter", "convention"),
    [("openai", "qwen2.5"), ("openai", "qwen3"), ("openai", "normalized"), ("openai", "pixels"), ("openai", "square"),
     ("gemini", "gemini")],
)
def test_a_served_pair_scores_what_pycocotools_gives_the_boxes_the_server_returned(
    pytester: pytest.Pytester, sample_split: Any, adapter: str, convention: str
) -> None:
    # what the runs import, imported before them: an in-process run unloads what it imported
    import faster_coco_eval  # noqa: F401

    import rf100vl_hf.metrics  # noqa: F401

    answer, predictions, truth = scripted(sample_split, convention)
    reference = 100 * precision_ap(pycocotools_eval(truth, predictions))
    assert 0 < reference < 100 and not math.isnan(reference)
    serve = serve_openai if adapter == "openai" else serve_gemini
    with serve(answer=answer) as server:
        result = pytester.runpytest_inprocess(
            "--rf100vl-model", f"{adapter}:stand-in-vl", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu",
            "--benchmark-disable", "--override-ini", "rf100vl_cache=off", "-p", "no:cacheprovider",
            "--rf100vl-adapter-option", f"{adapter}.base_url={server.url}",
            "--rf100vl-adapter-option", f"{adapter}.coordinates={convention}",
        )
    result.assert_outcomes(passed=1)
    (row,) = [json.loads(line) for line in
              (pytester.path / ".rf100vl" / "results" / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert row["failed_images"] == 0 and row["n_images"] == len(truth["images"])
    assert row["ap"] == pytest.approx(reference, abs=1e-9)
