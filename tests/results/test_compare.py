"""``results compare``: AP differences of two results folders, per dataset with a paired bootstrap
interval over images and per domain mean with one over datasets, checked against pycocotools."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rf100vl_hf.cli import main
from rf100vl_hf.errors import DataError
from rf100vl_hf.results.compare import compare
from rf100vl_hf.results.rows import read_jsonl

from tests.results.scored import DATASETS, TEST_IMAGES, write_exports, write_folder
from tests.support.coco_reference import noisy_predictions


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Exports of three datasets, and folders of a worse (A) and a better (B) detector."""
    root = tmp_path_factory.mktemp("compare")
    exported = write_exports(root / "data")

    def predictions(jitter: float, false_per_image: int, seed: int) -> dict[str, list[dict[str, Any]]]:
        return {name: noisy_predictions(np.random.default_rng(seed + i), exported[name].truth, jitter, false_per_image)
                for i, name in enumerate(DATASETS)}

    worse, better = predictions(0.15, 6, 0), predictions(0.02, 1, 10)
    return {
        "root": root, "data": root / "data", "exported": exported, "worse": worse,
        "ap_a": write_folder(root / "a", "weak", exported, worse),
        "ap_b": write_folder(root / "b", "strong", exported, better),
    }


def test_a_folder_against_itself_differs_by_zero_everywhere(world) -> None:
    result = compare(world["root"] / "a", world["root"] / "a", data_dir=world["data"], resamples=200, progress=False)
    assert [d.name for d in result.datasets] == ["bees", "fish-market-ggjso", "sample"]  # in Table 2's order
    for d in result.datasets:
        assert (d.difference, d.low, d.high, d.images) == (0.0, 0.0, 0.0, TEST_IMAGES)
        assert d.ap_a == pytest.approx(world["ap_a"][d.name], abs=1e-9)
    assert [(m.name, m.difference, m.low, m.high) for m in result.means] == [
        ("Flora & Fauna", 0.0, 0.0, 0.0), ("custom", 0.0, None, None), ("All", 0.0, 0.0, 0.0)
    ]


def test_a_better_model_wins_by_what_pycocotools_gives_with_intervals_around_it(world) -> None:
    result = compare(world["root"] / "a", world["root"] / "b", data_dir=world["data"], resamples=300, progress=False)
    expected = {name: world["ap_b"][name] - world["ap_a"][name] for name in DATASETS}
    assert min(expected.values()) > 10  # a clearly better model
    for d in result.datasets:
        assert d.difference == pytest.approx(expected[d.name], abs=1e-9)
        assert 0 < d.low < d.difference < d.high
    flora, custom, every = result.means
    assert flora.difference == pytest.approx(np.mean([expected["bees"], expected["fish-market-ggjso"]]), abs=1e-9)
    assert min(expected["bees"], expected["fish-market-ggjso"]) <= flora.low <= flora.high <= \
        max(expected["bees"], expected["fish-market-ggjso"])
    assert (custom.datasets, custom.difference, custom.low) == (1, pytest.approx(expected["sample"]), None)
    assert (every.datasets, every.difference) == (3, pytest.approx(np.mean(list(expected.values())), abs=1e-9))

    swapped = compare(world["root"] / "b", world["root"] / "a", data_dir=world["data"], resamples=300, progress=False)
    for forward, backward in zip(result.datasets, swapped.datasets):  # the same draws: a mirror image
        assert (backward.difference, backward.low, backward.high) == pytest.approx(
            (-forward.difference, -forward.high, -forward.low), abs=1e-9)


def test_each_error_type_changes_by_the_rows_difference_with_intervals_over_datasets(world) -> None:
    result = compare(world["root"] / "a", world["root"] / "b", data_dir=world["data"], resamples=300, progress=False)
    rows = {side: {row["dataset"]: row for row in read_jsonl(world["root"] / side / "results.jsonl")}
            for side in ("a", "b")}
    assert list(result.errors) == [f"tide_{name}" for name in ("cls", "loc", "both", "dupe", "bkg", "miss", "fp", "fn")]
    for key, (flora, custom, every) in result.errors.items():
        change = {name: rows["b"][name][key] - rows["a"][name][key] for name in DATASETS}
        assert every.difference == pytest.approx(np.mean(list(change.values())), abs=1e-9)
        assert (custom.difference, custom.low) == (pytest.approx(change["sample"], abs=1e-9), None)
        assert min(change["bees"], change["fish-market-ggjso"]) - 1e-9 <= flora.low <= flora.high <= \
            max(change["bees"], change["fish-market-ggjso"]) + 1e-9
    assert result.errors["tide_loc"][-1].difference < 0  # B localises better: jitter 0.02 against 0.15
    same = compare(world["root"] / "a", world["root"] / "a", data_dir=world["data"], resamples=50, progress=False)
    assert all(m.difference == 0.0 for means in same.errors.values() for m in means)


def test_intervals_are_seeded(world) -> None:
    def bounds(seed: int) -> list[tuple[float | None, float | None]]:
        result = compare(world["root"] / "a", world["root"] / "b", data_dir=world["data"], resamples=30, seed=seed,
                         progress=False)
        return [(d.low, d.high) for d in result.datasets + result.means]

    assert bounds(3) == bounds(3) and bounds(3) != bounds(4)


def test_datasets_scored_on_other_images_or_by_one_folder_only_are_listed_not_compared(world, tmp_path) -> None:
    limited = {name: [p for p in world["worse"][name] if p["image_id"] in {0, 1, 2}] for name in ("bees",)}
    write_folder(tmp_path / "c", "weak", world["exported"], limited, limit=3)
    write_folder(tmp_path / "d", "weak", world["exported"], {"sample": world["worse"]["sample"]})
    result = compare(world["root"] / "a", tmp_path / "c", data_dir=world["data"], resamples=10, progress=False)
    assert result.datasets == [] and result.means == []
    assert result.skipped == {"fish-market-ggjso": "only in A", "sample": "only in A",
                              "bees": "scored on different images: limit None vs 3"}
    result = compare(tmp_path / "d", world["root"] / "b", data_dir=world["data"], resamples=10, progress=False)
    assert [d.name for d in result.datasets] == ["sample"]
    assert result.skipped == {"bees": "only in B", "fish-market-ggjso": "only in B"}


def test_predictions_are_found_in_a_moved_folder_and_must_still_give_their_rows_ap(world, tmp_path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(world["root"] / "a", moved)
    rows = [json.loads(line) for line in (moved / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["predictions_file"] = str(Path("/gone") / Path(row["predictions_file"]).relative_to(world["root"] / "a"))
    rows[0]["ap"] += 1.0
    (moved / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(DataError, match=r"moved/predictions/weak/bees/test\.json: ap: scores .* but the row of weak "
                                        r"on bees \(test\) says .*: a later run wrote over the file"):
        compare(moved, world["root"] / "b", data_dir=world["data"], resamples=10, progress=False)
    rows[0]["ap"] -= 1.0
    (moved / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = compare(moved, world["root"] / "b", data_dir=world["data"], resamples=10, progress=False)
    assert len(result.datasets) == 3


def test_rows_of_another_export_or_of_several_models_are_errors(world, tmp_path) -> None:
    for side in ("e", "f"):
        write_folder(tmp_path / side, "weak", world["exported"], {"bees": world["worse"]["bees"]},
                     dataset_fingerprint="not-this-export")
    with pytest.raises(DataError, match="bees: dataset_fingerprint: the export on disk .* is not the one the results "
                                        r"were scored on \(not-this-export\)"):
        compare(tmp_path / "e", tmp_path / "f", data_dir=world["data"], resamples=10, progress=False)
    both = tmp_path / "both"
    shutil.copytree(world["root"] / "a", both)
    with (both / "results.jsonl").open("a", encoding="utf-8") as handle:
        handle.write((world["root"] / "b" / "results.jsonl").read_text(encoding="utf-8"))
    with pytest.raises(DataError, match=r"rows of bees: 2 of them \(weak, strong\): choose one model with --option model-a"):
        compare(both, world["root"] / "b", data_dir=world["data"], resamples=10, progress=False)
    result = compare(both, world["root"] / "b", model_a="weak", data_dir=world["data"], resamples=10, progress=False)
    assert len(result.datasets) == 3


def test_the_command_prints_the_table_in_each_format(world, capsys) -> None:
    args = ["results", "compare", str(world["root"] / "a"), str(world["root"] / "b"), "--option", f"data-dir={world['data']}", "--option", "resamples=50"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "## AP50:95 difference (B - A, AP points)" in out and "- B: " in out and "50 resamples (seed 0)" in out
    assert "| Dataset | Domain | n | AP A | AP B | B - A | 95% CI low | 95% CI high |" in out
    line = next(line for line in out.splitlines() if line.startswith("| bees |"))
    assert f"| {world['ap_a']['bees']:.2f} | {world['ap_b']['bees']:.2f} |" in line
    assert "| **All** | mean | 3 |" in out
    assert "## Errors by type: change in ΔAP50 (B - A, AP points; less is fewer errors)" in out
    assert "| Error type | Domain | n | ΔAP50 A | ΔAP50 B | B - A | 95% CI low | 95% CI high |" in out
    assert main([*args, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0] == "Dataset,Domain,n,AP A,AP B,B - A,95% CI low,95% CI high"
    assert "A: " in captured.err
    assert main([*args, "--format", "json"]) == 0
    assert [d["name"] for d in json.loads(capsys.readouterr().out)["datasets"]] == list(DATASETS)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--option", "resamples=0"], "argument --option: resamples: expected an integer of at least 1, not '0'"),
        (["--option", "confidence=1.5"], "argument --option: confidence: expected a number in (0, 1], not '1.5'"),
    ],
)
def test_bad_arguments_are_one_line_errors(world, capsys, extra: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["results", "compare", str(world["root"] / "a"), str(world["root"] / "b"), *extra])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_folder_without_results_is_a_one_line_error(world, tmp_path, capsys) -> None:
    assert main(["results", "compare", str(tmp_path), str(world["root"] / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rf100vl-hf: error: {tmp_path}: results.jsonl: missing") and err.count("\n") == 1


def _seeded(world: dict[str, Any], folder: Path, spec: str, jitter: float, false_per_image: int) -> Path:
    """A folder of ``spec`` fine-tuned with seeds 0-2: one row per dataset and seed."""
    lines = []
    for seed in range(3):
        predictions = {name: noisy_predictions(np.random.default_rng(100 * seed + i), world["exported"][name].truth,
                                               jitter, false_per_image) for i, name in enumerate(DATASETS)}
        write_folder(folder / f"seed{seed}", spec, world["exported"], predictions, seed=seed, train_split="train")
        lines += (folder / f"seed{seed}" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_the_comparison_says_whether_the_difference_is_significant_and_by_which_test(world, tmp_path) -> None:
    plain = compare(world["root"] / "a", world["root"] / "b", data_dir=world["data"], resamples=50, progress=False)
    assert plain.significance.startswith("B is higher than A by ")
    assert "Wilcoxon signed-rank test over 3 datasets" in plain.significance
    weak = _seeded(world, tmp_path / "weak", "weak", 0.15, 6)
    strong = _seeded(world, tmp_path / "strong", "strong", 0.02, 1)
    seeded = compare(weak, strong, data_dir=world["data"], resamples=50, progress=False)
    assert "Welch t-test over seeds (3 and 3)" in seeded.significance
    assert seeded.significance.endswith("significant at 0.05") and "not significant" not in seeded.significance
    assert len(seeded.datasets) == 3  # one bootstrap per dataset, on each side's lowest seed


def test_a_row_whose_ap_is_not_a_number_is_listed_not_compared(world, tmp_path) -> None:
    nan = tmp_path / "nan"
    shutil.copytree(world["root"] / "a", nan)
    rows = [json.loads(line) for line in (nan / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    rows[0]["ap"] = float("nan")  # what json.dumps writes for a NaN: NaN
    (nan / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = compare(nan, world["root"] / "b", data_dir=world["data"], resamples=10, progress=False)
    assert result.skipped == {rows[0]["dataset"]: "AP of A is not a number (nan)"}
    assert [d.name for d in result.datasets] == sorted(set(DATASETS) - {rows[0]["dataset"]})


def test_two_folders_with_no_dataset_in_common_are_a_one_line_error(world, tmp_path, capsys) -> None:
    write_folder(tmp_path / "only-sample", "weak", world["exported"], {"sample": world["worse"]["sample"]})
    write_folder(tmp_path / "only-bees", "weak", world["exported"], {"bees": world["worse"]["bees"]})
    code = main(["results", "compare", str(tmp_path / "only-sample"), str(tmp_path / "only-bees"), "--option", f"data-dir={world['data']}", "--option", "resamples=10"])
    error = capsys.readouterr().err.splitlines()[-1]  # below the progress bar
    assert code == 2 and error.startswith("rf100vl-hf: error: ")
    assert error.endswith("datasets: no dataset was compared (sample: only in A; bees: only in B)")
