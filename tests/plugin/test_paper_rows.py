"""Which paper row each model, regime and recipe compares with (``--rf100vl-reference paper``)."""

from __future__ import annotations

import pytest

from pytest_rf100vl.kinds.rf100vl.reference import PAPER_METHODS, PaperMethod, paper_row, paper_table, table_of


@pytest.mark.parametrize("method", PAPER_METHODS, ids=lambda m: f"{m.regime}-{m.row}")
def test_every_mapped_row_is_in_its_regimes_section_of_the_paper(method: PaperMethod) -> None:
    assert method.row in paper_table(table_of("all", method.regime), method.regime)


@pytest.mark.parametrize(("checkpoint", "regime", "recipe", "federated", "row"), [
    ("yolov8n.pt", "few-shot", "ultralytics", False, "YOLOv8n"),
    ("yolov8s.pt", "few-shot", "ultralytics", True, "YOLOv8s w/ federated loss"),
    ("yolov8m.pt", "semi-supervised", "ultralytics", False, "YOLOv8m"),
    ("yolov8m.pt", "semi-supervised", "stac", False, "YOLOv8m w/ STAC"),
    ("yolo11s.pt", "fully-supervised", "ultralytics", False, "YOLOv11s"),
    ("yolo11s.pt", "few-shot", "ultralytics", False, None),  # the paper ran YOLO11 fully supervised only
    ("yolov8n.pt", "fully-supervised", "stac", False, None),
    ("tiny", "fully-supervised", "ultralytics", False, None),
    ("yolo26n.pt", "fully-supervised", "ultralytics", False, None),  # the paper predates YOLO26
    ("tiny26", "few-shot", "ultralytics", True, None),
])
def test_yolo_rows_follow_checkpoint_regime_recipe_and_loss(checkpoint: str, regime: str, recipe: str, federated: bool,
                                                            row: str | None) -> None:
    assert paper_row(f"yolo:{checkpoint}", checkpoint, "names", {}, regime, recipe, federated) == row


def test_grounding_dino_fine_tuned_with_the_federated_loss_is_not_the_papers_fine_tuned_row() -> None:
    assert paper_row("grounding-dino", None, "names", {}, "few-shot", "gdino-fewshot") == "GroundingDINO (fine-tuned)"
    assert paper_row("grounding-dino", None, "names", {}, "few-shot", "gdino-fewshot", True) is None


# ---------------------------------------------------------------- the leaderboard (--rf100vl-reference leaderboard)

LEADERBOARD = [  # (row, regime, RF100-VL All), as the published tables give them
    *((f"RF-DETR {size}", "fully-supervised", value) for size, value in
      zip(("N", "S", "M", "L", "XL", "2XL"), (57.7, 60.2, 61.2, 62.2, 62.9, 63.2))),
    *((f"D-FINE {size}", "fully-supervised", value) for size, value in zip("NSMLX", (58.2, 60.3, 60.6, 61.6, 62.2))),
    *((f"LW-DETR {size}", "fully-supervised", value) for size, value in zip("TSMLX", (57.1, 57.4, 59.8, 61.5, 62.1))),
    *((f"YOLO26 {size}", "fully-supervised", value) for size, value in zip("NSMLX", (52.0, 57.0, 58.7, 59.3, 60.0))),
    *((f"YOLO11 {size}", "fully-supervised", value) for size, value in zip("NSMLX", (55.3, 56.2, 56.5, 56.5, 56.2))),
    ("SAM 3", "zero-shot", 15.2), ("SAM 3", "few-shot", 36.5), ("SAM 3", "fully-supervised", 61.6),
    ("Grounding DINO", "zero-shot", 15.7), ("Grounding DINO (fine-tuned)", "few-shot", 33.7),
]


@pytest.mark.parametrize(("row", "regime", "value"), LEADERBOARD, ids=[f"{r}-{g}" for r, g, _ in LEADERBOARD])
def test_every_leaderboard_row_is_present_with_its_provenance_and_mapped(row: str, regime: str, value: float) -> None:
    from pytest_rf100vl.kinds.rf100vl.reference import LEADERBOARD_METHODS, leaderboard_rows

    published = leaderboard_rows(regime)[row]
    assert float(published["All"]) == value and set(published) == {"setting", "method", "All", "source", "version"}
    assert published["source"].strip() and published["version"].strip()
    assert any(m.row == row and m.regime == regime for m in LEADERBOARD_METHODS)


def test_the_leaderboard_holds_nothing_else_and_every_mapping_has_its_row() -> None:
    from pytest_rf100vl.kinds.rf100vl.reference import LEADERBOARD_METHODS, leaderboard_rows

    held = {(row, regime) for regime in ("zero-shot", "few-shot", "fully-supervised") for row in leaderboard_rows(regime)}
    assert held == {(row, regime) for row, regime, _ in LEADERBOARD}
    assert {(m.row, m.regime) for m in LEADERBOARD_METHODS} == held
    readme = leaderboard_rows("fully-supervised")["RF-DETR N"]
    assert "roboflow/rf-detr README" in readme["source"] and "2511.09554" in readme["source"]
    assert "35ac6ab" in readme["version"] and "2026-01-30" in readme["version"]
    assert "2511.16719" in leaderboard_rows("zero-shot")["SAM 3"]["source"]


@pytest.mark.parametrize(("spec", "regime", "recipe", "row"), [
    ("rf-detr:roboflow/rf-detr-large", "fully-supervised", "detr-finetune", "RF-DETR L"),
    ("rf-detr:roboflow/rf-detr-xlarge", "fully-supervised", "detr-finetune", "RF-DETR XL"),
    ("rf-detr:rf-detr-xxlarge.pth", "fully-supervised", "detr-finetune", "RF-DETR 2XL"),
    ("rf-detr:rf-detr-nano", "fully-supervised", "detr-finetune", "RF-DETR N"),
    ("rf-detr:rf-detr-nano", "fully-supervised", "another", None),
    ("rf-detr:rf-detr-nano", "few-shot", "detr-finetune", None),
    ("d-fine:ustc-community/dfine_x_coco", "fully-supervised", "detr-finetune", "D-FINE X"),
    ("d-fine:ustc-community/dfine_n_coco", "fully-supervised", "detr-finetune", "D-FINE N"),
    ("lw-detr:lwdetr_tiny_60e_coco", "fully-supervised", "detr-finetune", "LW-DETR T"),
    ("yolo:yolo26n.pt", "fully-supervised", "ultralytics", "YOLO26 N"),
    ("yolo:yolo26x.pt", "fully-supervised", "ultralytics", "YOLO26 X"),
    ("yolo:yolo11l.pt", "fully-supervised", "ultralytics", "YOLO11 L"),
    ("yolo:yolov8n.pt", "fully-supervised", "ultralytics", None),
    ("sam3", "zero-shot", None, "SAM 3"),
    ("sam3", "few-shot", "anything", "SAM 3"),
    ("sam3", "fully-supervised", "anything", "SAM 3"),
    ("grounding-dino", "zero-shot", None, "Grounding DINO"),
    ("grounding-dino", "few-shot", "gdino-fewshot", "Grounding DINO (fine-tuned)"),
])
def test_leaderboard_rows_follow_adapter_size_word_recipe_and_regime(spec: str, regime: str, recipe: str | None,
                                                                     row: str | None) -> None:
    checkpoint = spec.partition(":")[2] or None
    assert paper_row(spec, checkpoint, "names", {}, regime, recipe, reference="leaderboard") == row


def test_the_paper_copy_is_arxiv_v1_and_says_so() -> None:
    """v1's numbers (later versions give 33.7 and 59.8), and every row names its source."""
    import csv
    from importlib import resources

    text = resources.files("rf100vl_hf").joinpath("data/paper_tables.csv").read_text("utf-8")
    assert {row["source"] for row in csv.DictReader(text.splitlines())} == {
        "RF100-VL paper: arXiv 2505.20612v1 (May 2025)"}
    assert paper_table("rf100vl_table2", "few-shot")["GroundingDINO (fine-tuned)"]["All"] == 33.3
    assert paper_table("rf100vl_table7", "fully-supervised")["LW-DETRm"]["All"] == 59.4


def _rows(spec: str, checkpoint: str, datasets: list[tuple[str, str]], ap: float, regime: str, recipe: str
          ) -> list[dict[str, object]]:
    return [{"spec": spec, "model": spec.partition(":")[0], "checkpoint": checkpoint, "dataset": name,
             "domain": domain, "ap": ap, "prompt": "names", "regime": regime, "recipe": recipe,
             "train_split": "train", "benchmark": "rf100vl"} for name, domain in datasets]


def test_the_leaderboard_checks_the_all_mean_only() -> None:
    from rf100vl_hf import catalog

    from pytest_rf100vl.core.checks import FAILED, NOT_CHECKED, PASSED
    from pytest_rf100vl.kinds.rf100vl.checks import reference_checks

    every = [(e.basename, e.domain) for e in catalog.entries()]
    spec = "yolo:yolo26s.pt"
    (check,) = reference_checks("all", {}, 0.5, _rows(spec, "yolo26s.pt", every, 57.2, "fully-supervised",
                                                      "ultralytics"), "leaderboard")
    assert (check.target, check.status) == ("All", PASSED)
    assert "over 100 datasets; leaderboard (roboflow/rf-detr README" in check.message and "'YOLO26 S'): 57.0" \
        in check.message
    (check,) = reference_checks("all", {}, 0.1, _rows(spec, "yolo26s.pt", every, 57.2, "fully-supervised",
                                                      "ultralytics"), "leaderboard")
    assert check.status == FAILED
    (check,) = reference_checks("all", {}, 0.5, _rows(spec, "yolo26s.pt", every[:30], 57.0, "fully-supervised",
                                                      "ultralytics"), "leaderboard")
    assert (check.target, check.status) == ("All", NOT_CHECKED)
    assert check.message == "30 of 100 datasets ran (the leaderboard table gives All only)"
    (check,) = reference_checks("rf20vl", {}, 0.5, _rows(spec, "yolo26s.pt", every, 57.0, "fully-supervised",
                                                         "ultralytics"), "leaderboard")
    assert check.status == NOT_CHECKED and "leaderboard table has no fully-supervised results for rf20vl" \
        in check.message
