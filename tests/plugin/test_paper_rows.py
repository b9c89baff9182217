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
