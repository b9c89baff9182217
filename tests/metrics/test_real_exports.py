"""The metric on real Roboflow exports, loaded through rf100vl_hf, against pycocotools."""

from __future__ import annotations

import json
import warnings
from collections import Counter

import numpy as np
import pytest

from rf100vl_hf.metadata import read_metadata
from rf100vl_hf.metrics import BACKENDS, coco_ground_truth, evaluate
from rf100vl_hf.rf100vl.builder import load_rf100vl

from tests.support.coco_reference import noisy_predictions, perfect_predictions, precision_ap, pycocotools_eval

EXPORTS = ("microcontroller", "chess-pieces")


@pytest.fixture(scope="module", params=EXPORTS)
def export(request, shared_data):
    """(test split, its COCO ground truth with the export's category ids, the raw test JSON)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the builder's few-shot warnings are about another split
        split = load_rf100vl(request.param, split="test", data_dir=shared_data, progress=False)
    ground_truth = coco_ground_truth(split, category_ids=read_metadata(split)["category_ids"])
    raw = json.loads((shared_data / request.param / "test" / "_annotations.coco.json").read_text())
    return split, ground_truth, raw


def test_ground_truth_holds_every_box_of_the_export(export):
    split, ground_truth, raw = export
    assert [i["id"] for i in ground_truth["images"]] == [i["id"] for i in raw["images"]]
    assert [(i["width"], i["height"]) for i in ground_truth["images"]] == [(i["width"], i["height"]) for i in
                                                                         raw["images"]]

    def boxes(annotations):
        return Counter((a["image_id"], a["category_id"], tuple(a["bbox"])) for a in annotations)

    assert boxes(ground_truth["annotations"]) == boxes(raw["annotations"])
    assert min(a["id"] for a in raw["annotations"]) == 0
    assert min(a["id"] for a in ground_truth["annotations"]) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_jittered_ground_truth_scores_as_pycocotools(export, backend):
    _, ground_truth, _ = export
    predictions = noisy_predictions(np.random.default_rng(0), ground_truth, jitter=0.08, false_per_image=3)
    scores = evaluate(ground_truth, predictions, backend=backend)
    assert 0.05 < scores.ap < 0.95
    assert scores.ap == pytest.approx(precision_ap(pycocotools_eval(ground_truth, predictions)), abs=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_raw_export_ids_cost_a_naive_evaluation_but_not_ours(export, backend):
    """Raw exports number annotations from 0: pycocotools on the file itself loses a match."""
    _, ground_truth, raw = export
    predictions = perfect_predictions(raw)
    assert precision_ap(pycocotools_eval(raw, predictions)) < 1.0
    assert evaluate(ground_truth, predictions, backend=backend).ap == 1.0
    assert evaluate(raw, predictions, backend=backend).ap == 1.0
