"""UOUO pairs in the matrix: collection, the oracle's exact scores, a detector end to end,
answers that cannot be read, a model that raises, UOUO-only adapters, the results files
and the Table-1-style summary."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from rf100vl_hf.metrics import QUADRANTS
from rf100vl_hf.uouo.plan import MODES

from pytest_rf100vl.kinds.uouo.kind import DATASETS as UOUO_DATASETS

from tests.plugin.conftest import NUM_MOSAICS
from tests.plugin.helpers import link, results

UOUO_ROW_COLUMNS = {
    "benchmark", "model", "spec", "checkpoint", "model_revision", "adapter_options", "dataset", "split", "n_images",
    "images_per_s", "latency_image_p50_ms", "device", "dtype", "batch_size", "torch_version", "datasets_version",
    "rf100vl_hf_version", "timestamp", "run_id", "smoke", "accuracy", "miou", "acc50", "parse_failures",
    "box_parse_failures", "quadrant_parse_failures", "failed_images", "first_error", "uouo_config", "uouo_source",
    "num_mosaics", "seed", "clip_model", "clip_weights", "dataset_fingerprint", "min_accuracy", "min_miou",
    "threshold_source", "check", "predictions_file",
}


def answers(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The answers file of a UOUO results row."""
    return [json.loads(line) for line in Path(row["predictions_file"]).read_text(encoding="utf-8").splitlines()]


def iou(a: list[float], b: list[float]) -> float:
    """Intersection over union of two ``xyxy`` boxes, written out (the reference for mIoU)."""
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_uouo_datasets_are_the_builder_configs() -> None:
    assert UOUO_DATASETS == tuple(f"uouo-{mode}" for mode in MODES)


def test_uouo_pairs_collect_beside_rf100vl_pairs_and_k_selects_them(pytester: pytest.Pytester) -> None:
    args = ["--rf100vl-model", "oracle", "--rf100vl-model", "owlv2", "--rf100vl-dataset", "sample,uouo-mmd,uouo-random"]
    result = pytester.runpytest_inprocess(*args, "--co", "-q")
    assert [line for line in result.outlines if "::" in line] == [
        "rf100vl::test_detection[oracle-sample]",
        "rf100vl::test_grounding[oracle-uouo-mmd]",
        "rf100vl::test_grounding[oracle-uouo-random]",
        "rf100vl::test_detection[owlv2-sample]",
        "rf100vl::test_grounding[owlv2-uouo-mmd]",
        "rf100vl::test_grounding[owlv2-uouo-random]",
    ]
    result = pytester.runpytest_inprocess(*args, "--co", "-q", "-k", "owlv2 and uouo-mmd")
    assert [line for line in result.outlines if "::" in line] == ["rf100vl::test_grounding[owlv2-uouo-mmd]"]
    result = pytester.runpytest_inprocess("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", "--co", "-q")
    assert [line for line in result.outlines if "::" in line] == ["rf100vl::test_detection[oracle-sample]"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--rf100vl-dataset", "uouo-hard"], "*unknown dataset 'uouo-hard'; closest: *uouo-*"),
        (["--rf100vl-dataset", "uouo-mmd", "--uouo-option", "num-mosaics=0"],
         "*--uouo-option num-mosaics: must be at least 1*"),
        (["--rf100vl-dataset", "uouo-mmd", "--uouo-option", "seed=-1"], "*--uouo-option seed: must be at least 0*"),
        (["--rf100vl-dataset", "uouo-mmd", "--uouo-option", "alpha-threshold=255"],
         "*--uouo-option alpha-threshold: expected an integer in 0..254, got 255"),
        (["--rf100vl-dataset", "uouo-mmd", "--uouo-option", "source=missing"],
         "*--uouo-option source: */missing is not a folder"),
        (["--rf100vl-dataset", "uouo-mmd", "--uouo-option", "mosaics=3"],
         "*--uouo-option: unknown key 'mosaics' (keys: source, num-mosaics, *"),
    ],
    ids=["name", "mosaics", "seed", "alpha", "source", "key"],
)
def test_bad_uouo_options_are_usage_errors(pytester: pytest.Pytester, options: list[str], message: str) -> None:
    result = pytester.runpytest_inprocess("--rf100vl-model", "oracle", *options, "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_build_settings_are_declared_once_for_the_plugin_and_the_command_line() -> None:
    """Each setting both routes to a UOUO build take has one declaration: the plugin's key and
    ``rf100vl-hf uouo prepare``'s show the same help and default, take the same values and refuse
    the same ones, and both hand the builder ``None`` for the weights ``none``."""
    import argparse

    from rf100vl_hf.cli import UOUO_SETTINGS
    from rf100vl_hf.uouo.defaults import BUILD_SETTINGS

    from pytest_rf100vl.core.options import options_of
    from pytest_rf100vl.kinds.uouo.options import GroundingOptions

    plugin = {declared.name: declared for declared in options_of(GroundingOptions)}
    command = {setting.key: setting for setting in UOUO_SETTINGS}
    probes = {"int": ["-1", "0", "1", "8", "254", "255"], "str": ["ViT-B-32", "none"]}
    for key, setting in BUILD_SETTINGS.items():
        assert plugin[key].help == f"{setting.help} (default: {setting.default})" and plugin[key].default is None
        assert (command[key].help, command[key].default) == (setting.help, setting.default)
        for text in probes[setting.kind]:
            try:
                given = command[key].type(text)
            except argparse.ArgumentTypeError:
                given = "refused"
            try:
                taken = GroundingOptions(**{setting.name: plugin[key].parse(text)}).given()[setting.name]
            except pytest.UsageError:
                taken = "refused"
            assert given == taken, (key, text)
    assert command["clip-pretrained"].type("none") is None


def test_the_oracle_scores_exactly_one_on_both_configs_under_the_benchmark_clock(
    pytester: pytest.Pytester, tiny_clip: str
) -> None:
    pytester.makeini(
        f"""
        [pytest]
        uouo_clip_model = {tiny_clip}
        uouo_clip_pretrained = none
        uouo_num_mosaics = {NUM_MOSAICS}
        rf100vl_device = cpu
        """
    )
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "uouo-random,uouo-mmd", "--benchmark-json", "bench.json"
    )
    result.assert_outcomes(passed=2)
    rows = results(pytester.path / ".rf100vl" / "results")
    assert [(r["dataset"], r["accuracy"], r["miou"], r["acc50"], r["parse_failures"], r["n_images"]) for r in rows] == [
        ("uouo-random", 1.0, 1.0, 1.0, 0, NUM_MOSAICS), ("uouo-mmd", 1.0, 1.0, 1.0, 0, NUM_MOSAICS)
    ]
    assert {row["clip_model"] for row in rows} == {tiny_clip}
    assert [line["iou"] for line in answers(rows[1])] == [1.0] * NUM_MOSAICS
    benchmarks = json.loads((pytester.path / "bench.json").read_text(encoding="utf-8"))["benchmarks"]
    assert [b["name"] for b in benchmarks] == ["test_grounding[oracle-uouo-random]", "test_grounding[oracle-uouo-mmd]"]
    assert all(b["extra_info"]["throughput_rounds"] == 1 and b["stats"]["rounds"] == 1 and b["extra_info"]["accuracy"] == 1.0
               for b in benchmarks)  # the oracle's throughput means nothing: no timing rounds, however short
    result.stdout.fnmatch_lines(
        [
            "## UOUO: mIoU and quadrant accuracy (as in its Table 1)",
            "",
            "| Model | mIoU mmd | mIoU random | accuracy mmd | accuracy random |",
            "| --- | ---: | ---: | ---: | ---: |",
            "| oracle (smoke) | 1.0000 | 1.0000 | 1.0000 | 1.0000 |",  # random CLIP: smoke mosaics
        ]
    )


def test_unread_quadrant_replies_are_parse_failures_and_a_failing_mosaic_costs_only_itself(
    fakes: pytest.Pytester, uouo: list[str], uouo_rows: Any
) -> None:
    """Both fakes answer the bottom-right cell and raise on mosaic 3; the talker is asked the
    quadrant and replies with no quadrant word, the pointer is never asked."""
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "talker", "--rf100vl-model", "pointer", "--rf100vl-dataset", "uouo-random", *uouo,
        "--rf100vl-batch-size", "2", "--benchmark-disable", "--override-ini", "rf100vl_max_failed_fraction=0.2",
    )
    result.assert_outcomes(passed=2)
    talker, pointer = results(fakes.path / ".rf100vl" / "results")
    truth = uouo_rows("random")
    cell = [400.0, 400.0, 800.0, 800.0]
    ious = [0.0 if i == 3 else iou(cell, box) for i, box in enumerate(truth["target_box"])]
    bottom_right = [i != 3 and quadrant == "bottom-right" for i, quadrant in enumerate(truth["target_quadrant"])]

    assert (talker["accuracy"], talker["quadrant_parse_failures"], talker["box_parse_failures"]) == (0.0, 8, 1)
    assert (talker["parse_failures"], talker["failed_images"]) == (8, 1)
    assert talker["miou"] == pytest.approx(np.mean(ious), abs=1e-12) and talker["miou"] > 0
    assert pointer["accuracy"] == pytest.approx(np.mean(bottom_right)) and any(bottom_right)  # from the box centre
    assert (pointer["quadrant_parse_failures"], pointer["parse_failures"], pointer["failed_images"]) == (1, 1, 1)
    assert pointer["miou"] == talker["miou"]
    assert {(c["truth"], c["answer"]) for c in talker["quadrant_confusion"]} <= {(q, "no answer") for q in QUADRANTS}
    assert sum(c["count"] for c in talker["quadrant_confusion"]) == NUM_MOSAICS
    assert {c["answer"] for c in pointer["quadrant_confusion"]} == {"bottom-right", "no answer"}
    assert pointer["iou_histogram"] == np.bincount(np.minimum(np.array(ious) * 10, 9).astype(int), minlength=10).tolist()
    assert "RuntimeError: lost for words on mosaic 3" in talker["first_error"]

    lines = answers(talker)
    assert [line["mosaic_id"] for line in lines] == list(range(NUM_MOSAICS))
    assert lines[0]["raw"]["quadrant"] == "somewhere near the middle" and lines[0]["quadrant"] is None
    assert lines[0]["target"] == truth[0]["target_category"] and lines[0]["target_box"] == truth[0]["target_box"]
    assert lines[0]["box"] == cell and lines[0]["parse_failure"] and not lines[0]["correct"]
    assert lines[3]["error"] == "RuntimeError: lost for words on mosaic 3" and lines[3]["box"] is None
    assert [line["iou"] for line in lines] == pytest.approx(ious, abs=1e-12)
    result.stdout.fnmatch_lines(["| talker (smoke) | uouo-random | * | 8 | * | 1 | 8 | 1 | unchecked |"])


def test_a_detector_runs_end_to_end_on_uouo(pytester: pytest.Pytester, uouo: list[str]) -> None:
    import pytest_rf100vl.adapters.owl  # noqa: F401  (loaded here once: in-process runs drop what they import)

    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "owlv2:tiny", "--rf100vl-dataset", "uouo-random", *uouo, "--uouo-option", "num-mosaics=3",
        "--benchmark-disable",
    )
    result.assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    assert (row["model"], row["checkpoint"], row["smoke"], row["n_images"], row["failed_images"]) == (
        "owlv2", "tiny", True, 3, 0
    )
    assert row["quadrant_parse_failures"] == row["box_parse_failures"]  # never asked: the box centre answers
    lines = answers(row)
    assert all(line["quadrant"] is None and line["raw"] == {} for line in lines)
    assert row["miou"] == pytest.approx(np.mean([line["iou"] for line in lines]))
    result.stdout.fnmatch_lines(["*SMOKE RUN*", "| owlv2:tiny (smoke) | — | * | — | * |"])


def test_uouo_thresholds_fail_a_pair_with_what_was_measured_and_where_the_minimum_came_from(
    fakes: pytest.Pytester, uouo: list[str]
) -> None:
    fakes.path.joinpath("thresholds.csv").write_text(
        "model,target,min_ap,min_accuracy,min_miou\n*,*,,0.99,0.99\npointer,uouo-random,,,0.0\n", encoding="utf-8"
    )
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-model", "pointer", "--rf100vl-dataset", "uouo-random", *uouo,
        "--override-ini", "rf100vl_thresholds=thresholds.csv", "--benchmark-disable",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*pointer on uouo-random: quadrant accuracy 0.* is below the minimum 0.9900 (from thresholds.csv line 2)"]
    )
    assert "pointer on uouo-random: mIoU" not in result.stdout.str()  # the file's row sets its mIoU minimum to 0
    oracle, pointer = results(fakes.path / ".rf100vl" / "results")
    assert (oracle["check"], oracle["min_accuracy"], oracle["min_miou"]) == ("passed", 0.99, 0.99)
    assert (pointer["check"], pointer["min_accuracy"], pointer["min_miou"]) == ("failed", 0.99, 0.0)
    assert pointer["threshold_source"] == "thresholds.csv line 2; thresholds.csv line 3"
    result.stdout.fnmatch_lines(["| pointer (smoke) | uouo-random |*| failed (accuracy >= 0.99, mIoU >= 0; "
                                 "thresholds.csv line 2; thresholds.csv line 3) |"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model,target,min_accuracy\n*,uouo-mmd,45\n",
         "*thresholds.csv: line 2: min_accuracy: 45 is not a fraction in [[]0, 1[]] (as in UOUO's Table 1)"),
        ("model,target,min_miou\n*,bees,0.2\n",
         "*thresholds.csv: line 2: min_miou: applies to a UOUO dataset (uouo-random, uouo-mmd), not 'bees'"),
        ("model,target,min_ap\n*,uouo-mmd,20\n",
         "*thresholds.csv: line 2: min_ap: applies to an RF100-VL dataset, domain or All, not 'uouo-mmd'"),
        ("model,target,min_ap,min_miou\n*,uouo-mmd,,\n",
         "*thresholds.csv: line 2: no minimum: fill min_ap or min_miou"),
        ("model,target,min_iou\n*,uouo-mmd,0.2\n",
         "*thresholds.csv: header: missing column(s) min_ap, min_accuracy or min_miou; expected model,target and*"),
        ("model,target,min_miou,min_iou\n*,uouo-mmd,0.2,0.1\n", "*thresholds.csv: header: unknown column(s) min_iou;*"),
    ],
    ids=["fraction", "uouo-metric-on-rf100vl", "ap-on-uouo", "no-minimum", "no-metric-column", "unknown-column"],
)
def test_a_bad_uouo_thresholds_row_is_a_usage_error(pytester: pytest.Pytester, text: str, message: str) -> None:
    pytester.path.joinpath("thresholds.csv").write_text(text, encoding="utf-8")
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "uouo-mmd", "--override-ini", "rf100vl_thresholds=thresholds.csv", "--co"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_uouo_only_adapter_is_left_out_of_rf100vl_pairs_and_runs_both_kinds_of_rows_side_by_side(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path, uouo: list[str]
) -> None:
    link(data_dir, "sample", small_sample)
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "clip-quadrant:tiny", "--rf100vl-model", "oracle", "--rf100vl-dataset", "sample,uouo-random",
        f"--rf100vl-data-option=data-dir={data_dir}", *uouo, "--benchmark-disable", "-rs",
    )
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "## Pairs left out (the model does not answer that benchmark)",
            "",
            "- clip-quadrant:tiny-sample: clip-quadrant does not answer rf100vl datasets (it answers: uouo)",
            "SKIPPED * clip-quadrant does not answer rf100vl datasets (it answers: uouo): pair left out",
        ]
    )
    folder = pytester.path / ".rf100vl" / "results"
    rows = results(folder)
    assert [(row["spec"], row["dataset"], row["benchmark"]) for row in rows] == [
        ("clip-quadrant:tiny", "uouo-random", "uouo"), ("oracle", "sample", "rf100vl"), ("oracle", "uouo-random", "uouo")
    ]
    clip = rows[0]
    assert clip["quadrant_parse_failures"] == 0 and clip["smoke"] and UOUO_ROW_COLUMNS <= set(clip)
    assert all(line["quadrant"] and "similarity" in line["raw"] for line in answers(clip))
    columns = set(pq.read_table(folder / "results.parquet").column_names)
    assert UOUO_ROW_COLUMNS | {"ap", "ap50", "n_predictions", "prompt", "domain"} <= columns
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "## AP50:95 (%)" in summary and "| sample | custom |" in summary
    assert "| oracle (smoke) | — | 1.0000 | — | 1.0000 |" in summary  # random CLIP: smoke mosaics
    assert "| clip-quadrant:tiny (smoke) | — |" in summary


def test_clip_weights_that_cannot_be_downloaded_error_the_pairs_naming_the_options(
    pytester: pytest.Pytester, tiny_clip: str  # tiny_clip: open_clip imported outside the in-process run
) -> None:
    started = time.perf_counter()
    result = pytester.runpytest_inprocess(  # the default CLIP weights, offline (the suite sets HF_HUB_OFFLINE)
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "uouo-mmd", "--uouo-option", "num-mosaics=2",
        "--rf100vl-device", "cpu",
    )
    assert time.perf_counter() - started < 60
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*dataset uouo-mmd: RuntimeError: building the uouo-mmd mosaics failed: downloading the CLIP weights "
        "'laion2b_s34b_b79k' of ViT-B-32 *: HF_HUB_OFFLINE is set*; without network use --uouo-option clip-pretrained=none "
        "(seeded random weights: a smoke run, scores mean nothing) or --uouo-option clip-pretrained=FILE*",
    ])
