"""``--rf100vl-limit N``: a quick check on the first N images of each split. Its score is what
pycocotools gives on those images, its row says it was limited, its predictions never replace a
full run's, and a limited row is never reused for a full run (nor merged with one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rf100vl_hf.results.rows import latest

from tests.plugin.helpers import link, results, session_rows
from tests.plugin.test_scores import jittered, pycocotools_ap

LIMIT = 3


def run(pytester: pytest.Pytester, model: str, data_dir: Path, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        "--rf100vl-model", model, "--rf100vl-dataset", "sample", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", "--benchmark-disable", *extra,
    )


def first_image_ids(data_dir: Path, count: int) -> list[int]:
    """The first ``count`` images of the sample's test split, in the order ``load_dataset`` gives."""
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    return load_rf100vl("sample", split="test", data_dir=data_dir, progress=False)["image_id"][:count]


def test_a_limited_pair_scores_what_pycocotools_gives_on_its_first_images(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path, tmp_path: Path
) -> None:
    link(data_dir, "sample", small_sample)
    annotations = small_sample / "test" / "_annotations.coco.json"
    predictions = jittered(annotations)  # for every image: the replay must accept those left out
    submitted = tmp_path / "submitted.json"
    submitted.write_text(json.dumps(predictions), encoding="utf-8")

    run(pytester, f"predictions:{submitted}", data_dir, f"--rf100vl-limit={LIMIT}").assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")

    kept = set(first_image_ids(data_dir, LIMIT))
    truth = json.loads(annotations.read_text(encoding="utf-8"))
    truth["images"] = [image for image in truth["images"] if image["id"] in kept]
    truth["annotations"] = [ann for ann in truth["annotations"] if ann["image_id"] in kept]
    cut = tmp_path / "first.json"
    cut.write_text(json.dumps(truth), encoding="utf-8")
    expected = pycocotools_ap(cut, [p for p in predictions if p["image_id"] in kept])
    assert abs(expected - pycocotools_ap(annotations, predictions)) > 1.0  # the cut changes the score
    assert row["ap"] == pytest.approx(expected, abs=1e-9)
    assert (row["limit"], row["n_images"]) == (LIMIT, LIMIT)
    written = Path(row["predictions_file"])
    assert written.name == f"test.first{LIMIT}.json" and written.with_name(f"test.first{LIMIT}.about.json").is_file()
    assert {record["image_id"] for record in json.loads(written.read_text(encoding="utf-8"))} <= kept


def test_a_limited_row_is_never_reused_for_a_full_run_nor_merged_with_it(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path
) -> None:
    link(data_dir, "sample", small_sample)
    folder = pytester.path / ".rf100vl" / "results"
    run(pytester, "oracle", data_dir, f"--rf100vl-limit={LIMIT}").assert_outcomes(passed=1)
    full = run(pytester, "oracle", data_dir)
    full.assert_outcomes(passed=1)
    again = run(pytester, "oracle", data_dir, f"--rf100vl-limit={LIMIT}")
    again.assert_outcomes(passed=1)

    (limited, whole), (reused,) = results(folder), session_rows(folder)
    assert (whole["limit"], whole["n_images"], whole["reused_from"]) == (None, 8, None)
    assert (reused["limit"], reused["n_images"], reused["reused_from"]) == (LIMIT, LIMIT, limited["run_id"])
    assert Path(whole["predictions_file"]).name == "test.json"
    assert len(json.loads(Path(whole["predictions_file"]).read_text(encoding="utf-8"))) > \
        len(json.loads(Path(limited["predictions_file"]).read_text(encoding="utf-8")))
    assert [(row["limit"], row["n_images"]) for row in latest(results(folder))] == [(LIMIT, LIMIT), (None, 8)]

    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "**LIMITED RUN" in summary and f"oracle on sample (first {LIMIT})" in summary
    assert f"| oracle [first {LIMIT}] |" in summary
    assert "LIMITED RUN" not in full.stdout.str()


def test_a_limit_below_one_is_a_usage_error(pytester: pytest.Pytester, data_dir: Path) -> None:
    result = run(pytester, "oracle", data_dir, "--rf100vl-limit", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--rf100vl-limit: must be at least 1, got 0" in result.stderr.str()


def test_a_limited_uouo_pair_asks_the_first_mosaics_only(fakes: pytest.Pytester, uouo: list[str], uouo_rows) -> None:
    """The pointer answers the bottom-right cell of every mosaic (and raises on mosaic 3)."""
    fakes.runpytest_inprocess(
        "--rf100vl-model", "pointer", "--rf100vl-dataset", "uouo-random", *uouo, "--benchmark-disable",
        f"--rf100vl-limit={LIMIT}",
    ).assert_outcomes(passed=1)
    (row,) = results(fakes.path / ".rf100vl" / "results")
    truth = uouo_rows("random")["target_quadrant"][:LIMIT]
    assert (row["limit"], row["n_images"], row["failed_images"]) == (LIMIT, LIMIT, 0)
    assert row["accuracy"] == pytest.approx(sum(q == "bottom-right" for q in truth) / LIMIT)
    lines = Path(row["predictions_file"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["mosaic_id"] for line in lines] == list(range(LIMIT))
    assert Path(row["predictions_file"]).name == f"test.first{LIMIT}.jsonl"


def test_limited_rows_are_never_reported_as_the_models_score_on_the_hub() -> None:
    from rf100vl_hf.hub.eval_results import UnofficialResultsError, eval_files

    from tests.results.factory import detection_row

    full, limited = detection_row("owlv2", "bees", 40.0), detection_row("owlv2", "actions", 90.0, limit=LIMIT)
    with pytest.raises(UnofficialResultsError, match="limited run.*allow-unofficial=true"):
        eval_files([full, limited], "org/rf100vl")
    (file,) = eval_files([full, detection_row("owlv2", "bees", 90.0, limit=LIMIT)], "org/rf100vl")
    assert {entry.task_id: entry.value for entry in file.entries} == {"bees": 40.0}  # the full row's
