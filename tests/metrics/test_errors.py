"""The error analysis of a scored split (:mod:`rf100vl_hf.metrics.errors`): its base is
pycocotools' AP50, it does not depend on the backend that scored the AP, a fixed score gives
no calibration figure, only the reason, and the label-error candidates are the first of
hotcoco's whole list however they are asked for."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from rf100vl_hf.metrics import errors, evaluate
from rf100vl_hf.metrics.backends import hotcoco_evaluator
from rf100vl_hf.metrics.errors import BACKGROUND, LABEL_ERRORS_KEPT, TIDE_ORACLES, TIDE_TYPES, ErrorAnalysis
from rf100vl_hf.metrics.inputs import check_ground_truth, check_results

from tests.support.coco_reference import noisy_predictions, pycocotools_eval, synthetic_ground_truth


@pytest.fixture(scope="module")
def case() -> tuple[dict, list[dict]]:
    rng = np.random.default_rng(11)
    ground_truth = synthetic_ground_truth(rng, n_images=30, boxes_per_image=6, category_ids=[1, 2, 3])
    return ground_truth, noisy_predictions(rng, ground_truth)


def test_the_base_is_pycocotools_ap50_and_the_backend_does_not_matter(case):
    ground_truth, predictions = case
    reference = pycocotools_eval(ground_truth, predictions).eval["precision"][0, :, :, 0, -1]
    analyses = {backend: evaluate(ground_truth, predictions, backend=backend, explain=True).errors
                for backend in ("hotcoco", "pycocotools")}
    errors = analyses["hotcoco"]
    assert errors is not None and analyses["pycocotools"] is not None
    assert errors.ap50 == pytest.approx(reference[reference > -1].mean(), abs=1e-12)  # summed in another order
    assert errors.delta_ap == analyses["pycocotools"].delta_ap
    np.testing.assert_array_equal(errors.confusion, analyses["pycocotools"].confusion)
    assert set(errors.delta_ap) == {*TIDE_TYPES, *TIDE_ORACLES} and set(errors.counts) == set(TIDE_TYPES)
    assert errors.counts["miss"] > 0 and errors.delta_ap["fn"] > 0
    assert errors.ece is not None and 0 <= errors.ece <= errors.mce <= 1 and errors.calibration_note is None
    assert evaluate(ground_truth, predictions).errors is None  # only when asked


def test_every_box_scored_the_same_gives_no_calibration_figure(case):
    ground_truth, predictions = case
    errors = evaluate(ground_truth, [dict(p, score=1.0) for p in predictions], explain=True).errors
    assert errors is not None
    assert (errors.ece, errors.mce, errors.fixed_score) == (None, None, 1.0)
    assert errors.calibration_note == "every detection scored 1: calibration is undefined"
    nothing = evaluate(ground_truth, [], explain=True).errors
    assert nothing is not None and nothing.calibration_note == "no detections"
    assert nothing.counts["miss"] == sum(not a["iscrowd"] for a in ground_truth["annotations"])
    unannotated = evaluate(dict(ground_truth, annotations=[]), predictions, explain=True).errors
    assert unannotated is not None and math.isnan(unannotated.ap50)  # hotcoco says 0: AP50 is undefined
    assert all(math.isnan(value) for value in unannotated.delta_ap.values())
    assert unannotated.counts["bkg"] == len(predictions) and unannotated.confusion[-1].sum() == len(predictions)


def test_confused_pairs_and_the_labelled_matrix():
    confusion = np.array([[5, 2, 0, 1], [7, 4, 0, 0], [0, 2, 9, 3], [1, 0, 0, 0]])
    errors = ErrorAnalysis(0.5, {}, {}, ["cat", "dog", "cow"], confusion, None, None, None, ())
    assert errors.confused_pairs(2) == [{"truth": "dog", "predicted": "cat", "count": 7},
                                        {"truth": "cat", "predicted": "dog", "count": 2}]
    lines = errors.confusion_csv().splitlines()
    assert lines[0] == f"truth \\ predicted,cat,dog,cow,{BACKGROUND}"
    assert lines[2] == "dog,7,4,0,0" and lines[-1] == f"{BACKGROUND},1,0,0,0"


class DiagnosticsSpy:
    """A hotcoco evaluator whose ``image_diagnostics`` calls are counted by their score threshold."""

    def __init__(self, evaluator: Any) -> None:
        self.evaluator, self.thresholds = evaluator, []

    def image_diagnostics(self, iou_thr: float, score_thr: float) -> dict[str, Any]:
        self.thresholds.append(score_thr)
        return self.evaluator.image_diagnostics(iou_thr=iou_thr, score_thr=score_thr)


@pytest.mark.parametrize("search, calls", [(40, 1), (1, 2)])
def test_the_label_error_candidates_are_the_best_of_hotcocos_whole_list(case, monkeypatch, search, calls):
    """Asked for among the ``search`` best-scored confident detections first (again among all of
    them when those hold too few), the candidates are the first of hotcoco's list at score 0.5."""
    ground_truth, predictions = case
    gt = check_ground_truth(ground_truth, None)
    results = check_results(predictions, gt)
    evaluator = hotcoco_evaluator(gt, results)
    whole = evaluator.image_diagnostics(iou_thr=0.5, score_thr=0.5)["label_errors"]
    expected = sorted(whole, key=lambda e: (-e["dt_score"], e["image_id"], e["dt_id"]))[:LABEL_ERRORS_KEPT]
    spy = DiagnosticsSpy(evaluator)
    monkeypatch.setattr(errors, "LABEL_ERROR_SEARCH", search)

    found = errors.label_error_candidates(spy, results.scores)

    assert len(whole) > LABEL_ERRORS_KEPT and len(spy.thresholds) == calls and spy.thresholds[0] > 0.5
    assert [(c.image_id, c.kind, c.predicted, c.truth, c.score) for c in found] == [
        (e["image_id"], e["type"], e["dt_category"], e["gt_category"], e["dt_score"]) for e in expected]
