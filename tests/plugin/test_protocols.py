"""``--rf100vl-protocol``: ``rf-scripts`` scores as Roboflow's public scripts (pycocotools at its
default maxDets 100, category 0 prompted and kept, no class-wise NMS, SAM 3 at 0.5). Its rows
carry the protocol in their identity: beside a ``paper`` row of the same pair they never merge,
are never reused for it, never rank with it, and the Hub's evaluation results refuse them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rf100vl_hf.results.rows import latest

from tests.plugin.helpers import link, results, session_rows
from tests.support.coco_reference import pycocotools_eval, summarize

ANNOTATIONS = "_annotations.coco.json"


def script_style(annotations_file: Path) -> list[dict[str, Any]]:
    """Predictions as Roboflow's scripts write them: every category of the file, category 0
    included; on the first image 150 confident false positives of one class, so that the best
    100 of that image and class hold none of its true boxes (maxDets 100 and 500 then differ)."""
    rng = np.random.default_rng(1)
    data = json.loads(annotations_file.read_text(encoding="utf-8"))
    first = data["images"][0]
    records = [{"image_id": ann["image_id"], "category_id": ann["category_id"], "score": float(rng.uniform(0, 0.5)),
                "bbox": [float(v) for v in ann["bbox"]]} for ann in data["annotations"]]
    target = next(ann["category_id"] for ann in data["annotations"] if ann["image_id"] == first["id"])
    for _ in range(150):
        records.append({"image_id": first["id"], "category_id": target, "score": float(rng.uniform(0.6, 1.0)),
                        "bbox": [float(rng.uniform(0, first["width"] / 2)), float(rng.uniform(0, first["height"] / 2)),
                                 3.0, 3.0]})
    for image in data["images"]:  # what the supercategory's query wins
        records.append({"image_id": image["id"], "category_id": 0, "score": 0.99, "bbox": [1.0, 1.0, 20.0, 20.0]})
    return records


def pycocotools_stats(annotations_file: Path, predictions: list[dict[str, Any]], max_dets: tuple[int, ...]
                      ) -> np.ndarray:
    """pycocotools on the export's own file, every category of it kept (annotation ids from 1)."""
    truth = json.loads(annotations_file.read_text(encoding="utf-8"))
    for number, annotation in enumerate(truth["annotations"], start=1):
        annotation["id"] = number
    return summarize(pycocotools_eval(truth, predictions, max_dets))


def run(pytester: pytest.Pytester, model: str, data_dir: Path, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("--rf100vl-model", model, "--rf100vl-dataset", "sample",
                                        f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-device", "cpu",
                                        "--benchmark-disable", *extra)


def test_each_protocol_scores_as_pycocotools_scores_its_own_file(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path, tmp_path: Path
) -> None:
    """A replayed file of the scripts' kind: ``rf-scripts`` gives pycocotools' ``stats[0]`` at its
    defaults on the export's own file (category 0 kept: it has no box, so it counts for nothing);
    ``paper`` gives AP at maxDets 500 with category 0 no class (its records ignored)."""
    from tests.plugin.test_scores import pycocotools_ap

    link(data_dir, "sample", small_sample)
    annotations = small_sample / "test" / ANNOTATIONS
    predictions = script_style(annotations)
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    (submitted / "sample.json").write_text(json.dumps(predictions), encoding="utf-8")
    model = f"predictions:{submitted}"
    run(pytester, model, data_dir).assert_outcomes(passed=1)
    run(pytester, model, data_dir, "--rf100vl-protocol", "rf-scripts").assert_outcomes(passed=1)
    paper, scripts = results(pytester.path / ".rf100vl" / "results")

    assert scripts["ap"] == pytest.approx(100 * pycocotools_stats(annotations, predictions, (1, 10, 100))[0],
                                          abs=1e-9)
    assert (scripts["protocol"], scripts["max_dets"], scripts["ar100"] is not None, scripts["ar500"]) == \
        ("rf-scripts", 100, True, None)
    assert scripts["n_predictions"] == len(predictions)
    kept = [record for record in predictions if record["category_id"] != 0]
    assert paper["ap"] == pytest.approx(pycocotools_ap(annotations, kept), abs=1e-9)
    assert (paper["protocol"], paper["max_dets"], "ar500" in paper, paper["n_predictions"]) == \
        ("paper", 500, True, len(kept))
    assert paper["ap"] > scripts["ap"]  # the cut at 100 drops true boxes

    # read back (results compare, draw): each row's file gives its AP again, at its own maxDets
    from rf100vl_hf.results.predictions import row_matches, row_split

    for row in (paper, scripts):
        split = row_split(row, data_dir)
        assert split.max_dets == row["max_dets"]
        assert 100 * row_matches(row, pytester.path / ".rf100vl" / "results", split).ap() == pytest.approx(row["ap"])


def test_an_rf_scripts_row_and_a_paper_row_of_one_pair_coexist_and_never_merge(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    from rf100vl_hf.hub.eval_results import UnofficialResultsError, eval_files
    from rf100vl_hf.results.summary import rf100vl_sections
    from rf100vl_hf.results.tables import leaderboard

    link(data_dir, "sample", small_sample)
    folder = pytester.path / ".rf100vl" / "results"
    run(pytester, "oracle", data_dir).assert_outcomes(passed=1)
    run(pytester, "oracle", data_dir, "--rf100vl-protocol", "rf-scripts").assert_outcomes(passed=1)
    paper, scripts = results(folder)
    assert (paper["protocol"], scripts["protocol"]) == ("paper", "rf-scripts")
    assert scripts["reused_from"] is None  # measured, not taken from the paper row
    # the oracle is told category 0 first and its boxes one class further: every box still in its class
    # (below 100: the sample's zero-width boxes match nothing)
    assert paper["ap"] == scripts["ap"] > 50 and paper["per_class"] == scripts["per_class"][1:]
    assert scripts["per_class"][0]["class"].startswith("shapes-sample") and scripts["per_class"][0]["ap"] is None
    assert len(latest(results(folder))) == 2  # two measurements: neither replaces the other

    run(pytester, "oracle", data_dir).assert_outcomes(passed=1)
    (paper_again,) = session_rows(folder)
    run(pytester, "oracle", data_dir, "--rf100vl-protocol", "rf-scripts").assert_outcomes(passed=1)
    (scripts_again,) = session_rows(folder)
    assert results(folder) == [paper, scripts]  # each reused, neither written again
    assert (paper_again["protocol"], paper_again["reused_from"]) == ("paper", paper["run_id"])
    assert (scripts_again["protocol"], scripts_again["reused_from"]) == ("rf-scripts", scripts["run_id"])

    header = (folder / "summary.md").read_text(encoding="utf-8")
    assert "- protocols: protocol rf-scripts (Roboflow's public scripts: maxDets 100" in header

    both = latest(results(folder))
    assert len(both) == 2
    text = "\n".join(rf100vl_sections(both))
    assert "## AP50:95 (%), protocol paper" in text and "## AP50:95 (%), protocol rf-scripts" in text
    with pytest.raises(ValueError, match="never rank together"):
        leaderboard(both)
    own = [row for row in both if row["protocol"] == "rf-scripts"]
    with pytest.raises(UnofficialResultsError, match="protocol.*rf-scripts"):
        eval_files(own, "org/rf100vl", partial=True)
    (file,) = eval_files(own, "org/rf100vl", partial=True, allow_unofficial=True)
    assert file.name == "rf100vl_rf-scripts" and "protocol rf-scripts, not the paper's" in file.entries[0].notes


def test_a_protocol_gives_adapters_default_options_that_the_user_overrides() -> None:
    from rf100vl_hf.specs import ModelSpec

    from pytest_rf100vl.core.config import AdapterOption, with_adapter_options
    from pytest_rf100vl.kinds.rf100vl.options import DetectionOptions

    defaults = DetectionOptions(protocol="rf-scripts").adapter_defaults()
    assert defaults["sam3"] == {"score_threshold": "0.5"} and defaults["owlv2"] == {"class_nms": "false"}
    assert DetectionOptions(protocol="paper").adapter_defaults() == {}
    given = (AdapterOption("sam3", "score_threshold", "0.3"), AdapterOption(None, "class_nms", "true"))
    def options(text: str, given: tuple[AdapterOption, ...]) -> dict[str, str]:
        return with_adapter_options(ModelSpec.parse(text), given, defaults).option_values

    assert options("owlv2:tiny", given) == {"class_nms": "true"}  # given wins
    assert options("sam3", given) == {"score_threshold": "0.3", "class_nms": "true"}
    assert options("sam3:facebook/sam3", ()) == {"score_threshold": "0.5"}


def test_under_rf_scripts_owl_is_asked_about_category_zero_and_keeps_every_box(sample_root: Path) -> None:
    """The kind's defaults reach the adapter (no class-wise NMS), and the task leads with
    category 0 in the template, scored at maxDets 100 with category 0 in the ground truth."""
    from dataclasses import replace

    from rf100vl_hf.protocols import PROTOCOLS
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    from rf100vl_hf.specs import ModelSpec

    from pytest_rf100vl.adapters import create
    from pytest_rf100vl.core.config import with_adapter_options
    from pytest_rf100vl.engine.runner import run_split
    from pytest_rf100vl.kinds.rf100vl.options import DetectionOptions
    from pytest_rf100vl.kinds.rf100vl.scores import detection_scores
    from pytest_rf100vl.kinds.rf100vl.split import DetectionSplit

    defaults = DetectionOptions(protocol="rf-scripts").adapter_defaults()
    spec = with_adapter_options(ModelSpec.parse("owlv2:tiny"), (), defaults)
    adapter = create(spec)
    try:
        splits = load_rf100vl("sample", data_dir=sample_root, progress=False)
        split = DetectionSplit.of(splits, "test", "names", PROTOCOLS["rf-scripts"]).first(2)
        meta = split.metadata

        def scored(trained: bool):
            task = split.task_for(adapter, trained)
            adapter.set_task(task)
            return detection_scores(run_split(adapter, split.images, progress=False), replace(split, task=task))

        evaluation = scored(trained=False)
        zero = meta["supercategory"]
        assert adapter.options["class_nms"] is False
        assert adapter.task.classes == [zero, *meta["classes"]] and adapter.task.category_ids[0] == 0
        assert adapter.prompt_texts(None)[0] == f"a photo of a {zero}"
        assert list(evaluation.result.per_class)[0] == zero and evaluation.result.max_dets == 100
        assert {record["category_id"] for record in evaluation.predictions} <= {0, *meta["category_ids"]}
        trained = scored(trained=True)  # a fine-tuned model: its own classes
        assert adapter.task.classes == meta["classes"] and zero not in trained.result.per_class
    finally:
        adapter.close()
