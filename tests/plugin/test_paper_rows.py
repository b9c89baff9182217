"""Which paper row each model, regime and recipe compares with (``--rf100vl-reference paper``)."""

from __future__ import annotations

import pytest

from rf100vl_hf.specs import ModelSpec

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
    assert paper_row(ModelSpec.parse(f"yolo:{checkpoint}"), checkpoint, "names", {}, regime, recipe, federated) == row


def test_grounding_dino_fine_tuned_with_the_federated_loss_is_not_the_papers_fine_tuned_row() -> None:
    gdino = ModelSpec.parse("grounding-dino")
    assert paper_row(gdino, None, "names", {}, "few-shot", "gdino-fewshot") == "GroundingDINO (fine-tuned)"
    assert paper_row(gdino, None, "names", {}, "few-shot", "gdino-fewshot", True) is None


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
    model = ModelSpec.parse(spec)
    assert paper_row(model, model.checkpoint, "names", {}, regime, recipe, reference="leaderboard") == row


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
    return [{"spec": spec, "model": ModelSpec.parse(spec).name, "checkpoint": checkpoint, "dataset": name,
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
    assert "over 100 datasets; leaderboard row 'YOLO26 S' (roboflow/rf-detr README" in check.message
    assert "35ac6ab" in check.message and "fully-supervised: 57.0;" in check.message
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


# ---------------------------------------------------------------- the DetPO board (--rf100vl-reference detpo)

DETPO = {  # RF20-VL All, as the DetPO paper (arXiv 2603.23455) gives them: a sample of its Tables 1-4
    "Gemini 3 Pro (class names)": 21.9, "Gemini 3 Pro (instructions)": 23.0,
    "Gemini 3 Pro (instructions + images)": 23.9, "Gemini 3 Pro (instructions + images), Table 2": 23.8,
    "Qwen3-VL 8B (instructions + images)": 7.0, "Qwen3-VL 30B-A3B (instructions)": 11.9,
    "Qwen2.5-VL 7B (class names)": 4.6, "Qwen2.5-VL 72B (class names)": 7.1, "Qwen2.5-VL 72B (instructions)": 10.4,
    "LLMDet (class names)": 17.2, "SAM 3 (class names)": 16.3, "Grounding DINO (class names)": 16.8,
    "MQ-GLIP (second setting)": 6.7, "YOLO-E (class names)": 9.2, "YOLO-E (third setting)": 13.4,
    "Qwen3-VL 30B-A3B + DetPO": 19.4, "Qwen3-VL 30B-A3B + DetPO + VQA re-scoring": 21.6,
    "Gemini 3 Pro + DetPO + VQA re-scoring": 26.3,
}


def test_the_detpo_rows_are_the_papers_with_table_version_commit_and_protocol() -> None:
    from pytest_rf100vl.kinds.rf100vl.reference import DETPO_METHODS, DETPO_TABLE, section_rows

    rows = section_rows("detpo", DETPO_TABLE, "zero-shot")
    assert len(rows) == 28
    for method, value in DETPO.items():
        assert rows[method].values == {"All": value}
    for row in rows.values():
        assert "2603.23455" in row.origin and row.version == "arXiv 2603.23455v1 (March 2026)"
        assert "ggare-cmu/DetPO at 4e0f960" in row.details and "protocol: " in row.details
        assert row.details.startswith("Table") and "DetPO" in row.describe()
    assert "vLLM" in rows["Qwen3-VL 8B (class names)"].details
    assert "self-reported" in rows["Qwen3-VL 30B-A3B + DetPO"].details
    assert {m.row for m in DETPO_METHODS} <= set(rows)
    assert table_of("all", "zero-shot", "detpo") is None and table_of("rf20vl", "few-shot", "detpo") is None


def test_every_reference_row_carries_the_version_it_copies() -> None:
    from pytest_rf100vl.kinds.rf100vl.reference import REFERENCES, published_rows

    for reference in REFERENCES:
        assert published_rows(reference) and all(row.version.strip() for row in published_rows(reference))
    assert {row.version for row in published_rows("paper")} == {"arXiv 2505.20612v1"}


@pytest.mark.parametrize(("spec", "prompt", "scores", "prompt_file", "row"), [
    ("gemini:gemini-3-pro-preview", "names", "one", False, "Gemini 3 Pro (class names)"),
    ("gemini:gemini-3-pro-preview", "instructions+fewshot", "one", False, "Gemini 3 Pro (instructions + images)"),
    ("gemini:gemini-2.5-pro", "names", "one", False, None),
    ("openai:Qwen/Qwen3-VL-30B-A3B-Instruct", "names", "one", False, "Qwen3-VL 30B-A3B (class names)"),
    ("qwen3-vl:Qwen/Qwen3-VL-8B-Instruct", "instructions", "one", False, "Qwen3-VL 8B (instructions)"),
    ("qwen2.5-vl:Qwen/Qwen2.5-VL-7B-Instruct", "names", "one", False, "Qwen2.5-VL 7B (class names)"),
    ("qwen2.5-vl:Qwen/Qwen2.5-VL-72B-Instruct", "names", "one", False, "Qwen2.5-VL 72B (class names)"),
    ("qwen3-vl:Qwen/Qwen3-VL-30B-A3B-Instruct", "instructions", "ask", True, "Qwen3-VL 30B-A3B + DetPO"),
    ("openai:Qwen/Qwen3-VL-30B-A3B-Instruct", "instructions", "vqa", True,
     "Qwen3-VL 30B-A3B + DetPO + VQA re-scoring"),
    ("qwen3-vl:Qwen/Qwen3-VL-30B-A3B-Instruct", "instructions", "vqa", False, None),  # re-scored, not optimised
    ("qwen3-vl:Qwen/Qwen3-VL-30B-A3B-Instruct", "names", "ask", False, None),  # asked scores: not the baseline
    ("gemini:gemini-3-pro", "instructions", "vqa", True, "Gemini 3 Pro + DetPO + VQA re-scoring"),
    ("llmdet", "names", "one", False, "LLMDet (class names)"),
    ("yoloe:yoloe-11l-seg.pt", "names", "one", False, "YOLO-E (class names)"),
])
def test_detpo_rows_follow_model_size_prompt_score_source_and_prompt_file(
        spec: str, prompt: str, scores: str, prompt_file: bool, row: str | None) -> None:
    model = ModelSpec.parse(spec)
    assert paper_row(model, model.checkpoint, prompt, {}, reference="detpo", scores=scores,
                     prompt_file=prompt_file) == row


def test_a_reference_is_chosen_by_source_and_version() -> None:
    from pytest_rf100vl.kinds.rf100vl.reference import ReferenceChoice, parse_reference, reference_table

    assert parse_reference("detpo@2603.23455v1") == ReferenceChoice("detpo", "2603.23455v1")
    assert parse_reference("leaderboard") == ReferenceChoice("leaderboard")
    sam3 = reference_table(parse_reference("leaderboard@2511.16719"), "leaderboard", "zero-shot")
    assert set(sam3) == {"SAM 3", "Grounding DINO"}  # the SAM 3 paper's rows, not the rf-detr README's
    with pytest.raises(ValueError, match=r"no paper row copies a version matching 'v9'; its versions: "
                                         r"arXiv 2505\.20612v1"):
        parse_reference("paper@v9")
    with pytest.raises(ValueError, match="unknown reference 'papers' \\(use one of paper, leaderboard, detpo"):
        parse_reference("papers")


def test_a_run_compared_with_one_row_names_the_other_published_rows_of_its_model() -> None:
    """Grounding DINO on RF20-VL: 17.1 in the RF100-VL paper's Table 3, 16.8 in DetPO's re-run."""
    from rf100vl_hf import catalog

    from pytest_rf100vl.core.checks import PASSED
    from pytest_rf100vl.kinds.rf100vl.checks import reference_checks

    rf20 = [(e.basename, e.domain) for e in catalog.select(None, "rf20vl")]
    rows = _rows("grounding-dino", "IDEA-Research/grounding-dino-tiny", rf20, 16.9, "zero-shot", None)
    (check,) = reference_checks("rf20vl", {}, 0.5, rows, "detpo")
    assert (check.target, check.status) == ("All", PASSED)
    assert "detpo detpo_rf20vl row 'Grounding DINO (class names)' (DetPO paper" in check.message
    assert "4e0f960" in check.message and "zero-shot: 16.8; difference +0.10" in check.message
    assert check.message.endswith("; also published, not compared: paper rf20vl_table3 row 'GroundingDINO' (RF100-VL "
                                  "paper: arXiv 2505.20612v1 (May 2025)): 17.1")
    gemini = _rows("gemini", "gemini-3-pro-preview", rf20, 23.9, "zero-shot", None)
    for row in gemini:
        row["prompt"] = "instructions+fewshot"
    (check,) = reference_checks("rf20vl", {}, 0.5, gemini, "detpo")
    assert ": 23.9; difference +0.00" in check.message
    assert "also published, not compared: detpo detpo_rf20vl row 'Gemini 3 Pro (instructions + images), Table 2'" \
        in check.message and check.message.endswith(": 23.8")
    checks = reference_checks("rf20vl", {}, 0.5, rows, "paper")
    assert {c.target for c in checks} == {*catalog.DOMAINS, "All"}
    assert all("also published, not compared: detpo detpo_rf20vl row 'Grounding DINO (class names)'" in c.message
               and c.message.endswith("4e0f960; protocol: DetPO's own re-run of the specialist detector): 16.8")
               for c in checks)


def test_lw_detr_small_compared_with_the_paper_names_the_leaderboards_re_measure() -> None:
    """LW-DETR-S: 58.0 in the paper's Table 7 (arXiv v1), 57.4 in the rf-detr README."""
    from rf100vl_hf import catalog

    from pytest_rf100vl.kinds.rf100vl.checks import reference_checks

    every = [(e.basename, e.domain) for e in catalog.entries()]
    rows = _rows("lw-detr", "AnnaZhang/lwdetr_small_60e_coco", every, 57.8, "fully-supervised", "detr-finetune")
    paper = {check.target: check for check in reference_checks("all", {}, 1.0, rows, "paper@2505.20612v1")}
    assert "paper rf100vl_table7 row 'LW-DETRs'" in paper["All"].message and "fully-supervised: 58.0;" in \
        paper["All"].message
    assert paper["All"].message.endswith("also published, not compared: leaderboard row 'LW-DETR S' (roboflow/rf-detr "
                                         "README (RF-DETR paper, arXiv 2511.09554); README.md at commit 35ac6ab "
                                         "(release 1.4.1, 2026-01-30); the table is unchanged since commit e44554c "
                                         "(2026-01-21)): 57.4")
    (board,) = reference_checks("all", {}, 1.0, rows, "leaderboard")
    assert ": 57.4; difference +0.40" in board.message
    assert board.message.endswith("'LW-DETRs' (RF100-VL paper: arXiv 2505.20612v1 (May 2025)): 58.0")
