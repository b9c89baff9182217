"""COCO box AP at maxDets=500 against pycocotools used directly, on generated data."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics import BACKENDS, CocoScores, evaluate

from tests.support.coco_reference import (
    noisy_predictions,
    perfect_predictions,
    precision_ap,
    pycocotools_eval,
    summarize,
    synthetic_ground_truth,
)

BACKEND_NAMES = list(BACKENDS)
HEADLINE = ("ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar")


@pytest.fixture(scope="module")
def case() -> tuple[dict, list[dict]]:
    """Category ids start at 0 (as cleaned exports number them); the last one has no box."""
    rng = np.random.default_rng(7)
    ground_truth = synthetic_ground_truth(rng, n_images=40, boxes_per_image=6, category_ids=[0, 1, 2, 3, 4])
    return ground_truth, noisy_predictions(rng, ground_truth)


@pytest.fixture(scope="module")
def clean_ground_truth() -> dict:
    """No crowd boxes, so that predicting every box exactly must score exactly 1."""
    rng = np.random.default_rng(3)
    return synthetic_ground_truth(rng, n_images=15, boxes_per_image=5, category_ids=[1, 2, 3, 4], crowd_fraction=0)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_matches_pycocotools_on_noisy_predictions(case, backend):
    ground_truth, predictions = case
    reference = pycocotools_eval(ground_truth, predictions)
    stats = summarize(reference)  # with maxDets [1, 10, 500]: AP50, AP75, areas and AR read at 500
    scores = evaluate(ground_truth, predictions, backend=backend)

    assert 0.05 < scores.ap < 0.95  # a case that exercises the curve, not a degenerate one
    assert scores.ap == pytest.approx(precision_ap(reference), abs=1e-12)
    expected = dict(zip(("ap50", "ap75", "ap_small", "ap_medium", "ap_large"), stats[1:6]))
    expected["ar"] = stats[8]
    for name, value in expected.items():
        assert getattr(scores, name) == pytest.approx(value, abs=1e-12), name
    assert list(scores.per_class) == [f"class-{c}" for c in range(5)]
    for k, name in enumerate(scores.per_class):
        if k == 4:
            assert math.isnan(scores.per_class[name])  # no ground truth in that class
        else:
            assert scores.per_class[name] == pytest.approx(precision_ap(reference, category=k), abs=1e-12)
    assert scores.n_images == 40
    assert scores.n_predictions == len(predictions)


@pytest.mark.parametrize("backend, tolerance", [("hotcoco", 0.0), ("faster-coco-eval", 1e-9)])
def test_backends_agree(case, backend, tolerance):
    """hotcoco's numbers are pycocotools' exactly; faster-coco-eval's to 1e-9."""
    ground_truth, predictions = case
    fast, slow = (evaluate(ground_truth, predictions, backend=name) for name in (backend, "pycocotools"))
    for name in HEADLINE:
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), abs=tolerance, nan_ok=True), name
    assert fast.per_class == pytest.approx(slow.per_class, abs=tolerance, nan_ok=True)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_perfect_predictions_score_exactly_one(clean_ground_truth, backend):
    scores = evaluate(clean_ground_truth, perfect_predictions(clean_ground_truth), backend=backend)
    assert scores.ap == 1.0
    assert scores.ap50 == scores.ap75 == scores.ar == 1.0
    *found, empty = scores.per_class.values()
    assert found == [1.0, 1.0, 1.0]
    assert math.isnan(empty)


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_no_predictions_score_zero(case, backend):
    ground_truth, _ = case
    with pytest.raises(IndexError):  # why this needs handling: pycocotools' loadRes([]) fails
        pycocotools_eval(ground_truth, [])
    for nothing in ([], np.zeros((0, 7))):
        scores = evaluate(ground_truth, nothing, backend=backend)
        assert scores.ap == scores.ap50 == scores.ar == 0.0
        assert scores.n_predictions == 0
        assert [v for v in scores.per_class.values() if not math.isnan(v)] == [0.0] * 4


def _trap_ground_truth() -> dict:
    """Two boxes numbered from 0, as raw Roboflow exports number them."""
    return {
        "images": [{"id": 0, "width": 100, "height": 100}],
        "annotations": [
            {"id": i, "image_id": 0, "category_id": 1, "bbox": [10.0 + 40 * i, 10.0, 30.0, 30.0], "area": 900.0,
             "iscrowd": 0}
            for i in range(2)
        ],
        "categories": [{"id": 1, "name": "thing"}],
    }


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_annotation_id_zero_does_not_cost_a_true_positive(backend):
    ground_truth = _trap_ground_truth()
    predictions = perfect_predictions(ground_truth)
    naive = precision_ap(pycocotools_eval(ground_truth, predictions))
    assert naive < 0.9  # the match to annotation 0 counts as a false positive
    assert evaluate(ground_truth, predictions, backend=backend).ap == 1.0


@pytest.fixture(scope="module")
def crowded() -> tuple[dict, list[dict]]:
    """150 separate objects in one image, all found, with distinct scores."""
    grid = [(x, y) for x in range(15) for y in range(10)]
    ground_truth = {
        "images": [{"id": 1, "width": 1500, "height": 1000}],
        "annotations": [
            {"id": i + 1, "image_id": 1, "category_id": 1, "bbox": [100.0 * x, 100.0 * y, 50.0, 50.0],
             "area": 2500.0, "iscrowd": 0}
            for i, (x, y) in enumerate(grid)
        ],
        "categories": [{"id": 1, "name": "thing"}],
    }
    predictions = [dict(p, score=1.0 - i / 1000) for i, p in enumerate(perfect_predictions(ground_truth))]
    return ground_truth, predictions


def test_summarize_is_the_wrong_reading_with_many_objects(crowded):
    """Why the metric reads the precision array: summarize() reports AP at 100 detections."""
    at_100 = pycocotools_eval(*crowded, max_dets=(1, 10, 100))
    assert summarize(at_100)[0] == precision_ap(at_100) < 0.7  # 100 of 150 objects can be found
    at_500 = pycocotools_eval(*crowded)
    assert summarize(at_500)[0] == -1  # summarize() looks for maxDets=100 and finds none
    assert precision_ap(at_500) == 1.0


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_reports_ap_at_500_detections(crowded, backend):
    scores = evaluate(*crowded, backend=backend)
    assert scores.ap == scores.ar == 1.0


def test_array_predictions_equal_dict_predictions(case):
    ground_truth, predictions = case
    rows = np.array(
        [[p["image_id"], *p["bbox"], p["score"], p["category_id"]] for p in predictions], dtype=np.float64
    )
    assert evaluate(ground_truth, rows) == evaluate(ground_truth, predictions)


def test_leaves_its_inputs_unchanged(case):
    ground_truth, predictions = case
    before = copy.deepcopy((ground_truth, predictions))
    for backend in BACKEND_NAMES:
        evaluate(ground_truth, predictions, backend=backend)
    assert (ground_truth, predictions) == before


def test_class_names_override_the_categories_names(clean_ground_truth):
    names = ["a", "b", "c", "d"]
    scores = evaluate(clean_ground_truth, perfect_predictions(clean_ground_truth), class_names=names)
    assert list(scores.per_class) == names
    assert scores.per_class["a"] == 1.0
    with pytest.raises(DataError, match="class_names: length: 2 names for 4 categories"):
        evaluate(clean_ground_truth, [], class_names=names[:2])


def test_percent_rounds_as_the_paper_prints():
    scores = CocoScores(0.12345, 0.5, 0.25, math.nan, 0.0, 1.0, 0.66666, {}, n_images=1, n_predictions=1)
    percent = scores.percent()
    assert {k: v for k, v in percent.items() if k != "ap_small"} == {
        "ap": 12.3, "ap50": 50.0, "ap75": 25.0, "ap_medium": 0.0, "ap_large": 100.0, "ar500": 66.7
    }
    assert math.isnan(percent["ap_small"])


def test_unknown_backend_lists_the_known_ones(clean_ground_truth):
    with pytest.raises(ValueError, match="unknown COCO backend 'detectron'; known: hotcoco, faster-coco-eval, pycocotools"):
        evaluate(clean_ground_truth, [], backend="detectron")


def _one(clean_ground_truth: dict, **change) -> list[dict]:
    predictions = perfect_predictions(clean_ground_truth)[:3]
    predictions[2] = {**predictions[2], **change}
    return predictions


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"image_id": 999}, r"predictions: \[2\]\.image_id: id 999 is not in the ground truth"),
        ({"category_id": 7}, r"predictions: \[2\]\.category_id: id 7 is not in the ground truth"),
        ({"image_id": 1.5}, r"predictions: \[2\]\.image_id: expected an integer id"),
        ({"bbox": [1.0, 2.0, float("nan"), 4.0]}, r"predictions: \[2\]\.bbox: not finite"),
        ({"bbox": [1.0, 2.0, 3.0]}, r"predictions: \[2\]\.bbox: expected 4 numbers"),
        ({"bbox": [1.0, 2.0, -3.0, 4.0]}, r"predictions: \[2\]\.bbox: negative width or height"),
        ({"score": float("inf")}, r"predictions: \[2\]\.score: not finite"),
    ],
)
def test_bad_predictions_are_named(clean_ground_truth, change, message):
    with pytest.raises(DataError, match=message):
        evaluate(clean_ground_truth, _one(clean_ground_truth, **change))


def test_missing_prediction_field_is_named(clean_ground_truth):
    predictions = perfect_predictions(clean_ground_truth)[:3]
    del predictions[1]["score"]
    with pytest.raises(DataError, match=r"predictions: \[1\]\.score: missing"):
        evaluate(clean_ground_truth, predictions)


def test_bad_array_shape_is_named(clean_ground_truth):
    with pytest.raises(DataError, match=r"predictions: shape: expected \(N, 7\)"):
        evaluate(clean_ground_truth, np.zeros((3, 6)))


def test_bad_ground_truth_is_named(clean_ground_truth):
    broken = copy.deepcopy(clean_ground_truth)
    broken["annotations"][4]["category_id"] = 42
    with pytest.raises(DataError, match=r"ground truth: annotations\[4\]\.category_id: id 42 is not in the ground"):
        evaluate(broken, [])
    broken = copy.deepcopy(clean_ground_truth)
    broken["images"].append(dict(broken["images"][0]))
    with pytest.raises(DataError, match=r"ground truth: images\[\]\.id: id 1 repeats"):
        evaluate(broken, [])
    with pytest.raises(DataError, match="ground truth: categories: missing, or not a list"):
        evaluate({"images": [], "annotations": []}, [])


# ---------------------------------------------------------------- ids and peer-style inputs: one answer per input


def _map_ids(ground_truth: dict, predictions: list[dict], image=lambda i: i, category=lambda c: c) -> tuple[dict, list]:
    """Copies with every image and category id mapped, wherever it appears."""
    gt = copy.deepcopy(ground_truth)
    for entry in gt["images"]:
        entry["id"] = image(entry["id"])
    for entry in gt["categories"]:
        entry["id"] = category(entry["id"])
    records = [*gt["annotations"], *copy.deepcopy(predictions)]
    for record in records:
        record["image_id"], record["category_id"] = image(record["image_id"]), category(record["category_id"])
    return gt, records[len(gt["annotations"]):]


def _ignore_flags(ground_truth: dict, predictions: list[dict]) -> tuple[dict, list]:
    """faster-coco-eval's gt_ignore_test.json carries an ``ignore`` key; pycocotools reads ``iscrowd`` only."""
    gt = copy.deepcopy(ground_truth)
    for i, ann in enumerate(gt["annotations"]):
        ann["ignore"] = i % 3 == 0
    return gt, predictions


ACCEPTED = {  # peer-style inputs both backends accept: each must score what pycocotools gives the input itself
    "ids written as floats": lambda gt, p: _map_ids(gt, p, float, float),
    "ids beyond 2**53 (a float64 would merge them)": lambda gt, p: _map_ids(gt, p, lambda i: 2**62 + i),
    "negative ids": lambda gt, p: _map_ids(gt, p, lambda i: -i, lambda c: c - 10),
    "annotations with an ignore key": _ignore_flags,
}


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_accepted_peer_style_input_scores_what_pycocotools_gives_it(case, case_ids_floats, backend):
    ground_truth, predictions = ACCEPTED[case](*case_ids_floats)
    scores = evaluate(ground_truth, predictions, backend=backend)
    reference = pycocotools_eval(ground_truth, predictions)
    assert 0.05 < scores.ap < 0.95
    assert scores.ap == pytest.approx(precision_ap(reference), abs=1e-12)
    assert scores.ap50 == pytest.approx(summarize(reference)[1], abs=1e-12)
    written_as_floats = case == "ids written as floats"
    expected = len(ground_truth["images"]) + len(ground_truth["categories"]) + 2 * (
        len(ground_truth["annotations"]) + len(predictions))
    assert scores.float_ids == (expected if written_as_floats else 0)


@pytest.fixture(scope="module")
def case_ids_floats() -> tuple[dict, list[dict]]:
    rng = np.random.default_rng(5)
    ground_truth = synthetic_ground_truth(rng, n_images=12, boxes_per_image=5, category_ids=[1, 2, 3])
    return ground_truth, noisy_predictions(rng, ground_truth)


def _peer_file() -> tuple[dict, list[dict]]:
    """The shape of faster-coco-eval's gt_ignore_test.json: the image's id is the string "2299",
    one annotation says "2299" and the others 2299, as do the detections."""
    boxes = [[70.0, 190.0, 64.0, 112.0], [140.0, 190.0, 72.0, 108.0], [204.0, 187.0, 66.0, 101.0]]
    ground_truth = {
        "images": [{"id": "2299", "width": 500, "height": 302, "file_name": "000000002299.jpg"}],
        "categories": [{"id": 1, "name": "person"}],
        "annotations": [{"id": 10 + i, "image_id": "2299" if i == 0 else 2299, "category_id": 1, "bbox": box,
                         "area": box[2] * box[3], "iscrowd": 0, "ignore": 0} for i, box in enumerate(boxes)],
    }
    return ground_truth, [{"image_id": 2299, "category_id": 1, "bbox": box, "score": 0.9} for box in boxes]


def _one_image(image: object = 1, ann: dict | None = None, **prediction: object) -> tuple[dict, list[dict]]:
    """One image (id ``image``) with two boxes of image id 1, both predicted exactly; ``ann``
    changes the first annotation and ``prediction`` the second prediction."""
    boxes = [[10.0, 10.0, 30.0, 30.0], [50.0, 50.0, 30.0, 20.0]]
    annotations = [{"id": i, "image_id": 1, "category_id": 1, "bbox": box, "area": box[2] * box[3], "iscrowd": 0}
                   for i, box in enumerate(boxes, start=1)]
    annotations[0].update(ann or {})
    ground_truth = {"images": [{"id": image, "width": 100, "height": 100}], "categories": [{"id": 1, "name": "a"}],
                    "annotations": annotations}
    predictions = [{"image_id": 1, "category_id": 1, "bbox": box, "score": 0.9} for box in boxes]
    predictions[1].update(prediction)
    return ground_truth, predictions


REFUSED = {  # inputs on which the backends disagreed (or one raised from inside): (input, source, field, words)
    "image id given as a string, as the issue shows it": (
        _one_image("1"), "ground truth", "images[0].id", "a string"),
    "faster-coco-eval's gt_ignore_test.json": (_peer_file(), "ground truth", "images[0].id", "a string"),
    "category id given as a string": (
        _one_image(ann={"category_id": "1"}), "ground truth", "annotations[0].category_id", "a string"),
    "prediction's image id given as a string": (_one_image(image_id="1"), "predictions", "[1].image_id", "a string"),
    "ids given as strings everywhere": (
        _one_image("1", {"image_id": "1"}, image_id="1"), "ground truth", "images[0].id", "a string"),
    "image id that is a boolean": (_one_image(True), "ground truth", "images[0].id", "True"),
    "image id beyond 64 bits": (_one_image(2**70), "ground truth", "images[0].id", "64 bits"),
    "iscrowd given as the string '0'": (
        _one_image(ann={"iscrowd": "0"}), "ground truth", "annotations[0].iscrowd", "expected 0 or 1"),
    "iscrowd of 0.5": (_one_image(ann={"iscrowd": 0.5}), "ground truth", "annotations[0].iscrowd", "expected 0 or 1"),
    "iscrowd of null": (_one_image(ann={"iscrowd": None}), "ground truth", "annotations[0].iscrowd", "0 or 1"),
    "box given as strings": (
        _one_image(ann={"bbox": ["10", "10", "30", "30"]}), "ground truth", "annotations[0].bbox", "4 numbers"),
    "area given as a string": (_one_image(ann={"area": "900"}), "ground truth", "annotations[0].area", "a number"),
}


@pytest.mark.parametrize("backend", BACKEND_NAMES)
@pytest.mark.parametrize("case", list(REFUSED))
def test_input_the_backends_would_score_differently_is_refused_naming_the_field(case, backend):
    (ground_truth, predictions), source, field, words = REFUSED[case]
    with pytest.raises(DataError) as caught:
        evaluate(ground_truth, predictions, backend=backend)
    assert (caught.value.path, caught.value.field) == (source, field)
    assert words in caught.value.reason


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_max_dets_100_is_pycocotools_with_its_defaults(backend: str) -> None:
    """The ``rf-scripts`` protocol's score: pycocotools' own ``stats`` with its default maxDets
    [1, 10, 100], as Roboflow's scripts read them, on images with more than 100 detections of a
    class (so the cut at 100 changes the score)."""
    from pycocotools.cocoeval import Params

    assert Params(iouType="bbox").maxDets == [1, 10, 100]
    rng = np.random.default_rng(11)
    ground_truth = synthetic_ground_truth(rng, n_images=3, boxes_per_image=40, category_ids=[1, 2, 3])
    predictions = noisy_predictions(rng, ground_truth, false_per_image=450)  # ~150 per class and image
    stats = summarize(pycocotools_eval(ground_truth, predictions, max_dets=(1, 10, 100)))
    at_100 = evaluate(ground_truth, predictions, backend=backend, max_dets=100)
    at_500 = evaluate(ground_truth, predictions, backend=backend)
    assert at_100.max_dets == 100 and at_100.ar_column == "ar100" and at_500.ar_column == "ar500"
    for name, value in zip(("ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large"), stats[:6]):
        assert getattr(at_100, name) == pytest.approx(value, abs=1e-12), name
    assert at_100.ar == pytest.approx(stats[8], abs=1e-12)
    assert at_100.ap != pytest.approx(at_500.ap, abs=1e-6)  # the cut matters here
    assert set(at_100.percent()) == {"ap", "ap50", "ap75", "ap_small", "ap_medium", "ap_large", "ar100"}
