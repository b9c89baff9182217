"""Tables, summary and parquet from rows: Table 2 and Table 1 layouts in md, csv and LaTeX,
per-class tables, one table over two sessions' folders, a parquet that round-trips."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest

from rf100vl_hf.results import (
    ap_table,
    error_tables,
    leaderboard,
    per_class_tables,
    read_parquet,
    read_results,
    render,
    select,
    summary,
    uouo_table,
    write_parquet,
    write_summary,
)

from tests.results.factory import DATASETS, catalogue_rows, detection_row, error_columns, uouo_row, write_jsonl

CATALOGUE_TABLES = Path(__file__).with_name("catalogue_tables.md")


@pytest.fixture
def rows():
    return [detection_row("owlv2", name, 40.0 + i) for i, name in enumerate(DATASETS)] + [
        detection_row("gdino", "bees", 30.0, answer_counts={"unknown label": 3}),
        detection_row("gdino", "actions", None),
    ]


def test_table_2_groups_datasets_by_domain_then_means_and_all(rows):
    lines = render(ap_table(rows), "md").splitlines()
    assert lines[0] == "| Dataset | Domain | owlv2 | gdino |"
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| bees", "| fish-market-ggjso", "| actions", "| sample",
        "| **Flora & Fauna**", "| **Sports**", "| **custom**", "| **All**"]
    assert lines[-1] == "| **All** | mean | 41.5 | 30.0 |"  # All is over datasets, not domain means
    assert "| actions | Sports | 42.0 | — |" in lines


def test_errors_by_type_per_model_with_domain_means(rows):
    explained = [dict(row, **error_columns(i)) for i, row in enumerate(rows[:3])] + rows[3:]
    (table,) = error_tables(explained).values()  # gdino's rows have no TIDE columns
    assert table.title == "Errors by type, owlv2: ΔAP50 if fixed (AP points)"
    assert table.header == ["Domain", "AP50", "Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FP oracle", "FN oracle"]
    assert table.rows[0] == ["Flora & Fauna", 60.5, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5]  # bees and fish-market
    assert table.rows[-1][:3] == ["All", 61.0, 1.0]
    text = summary(explained)
    assert "### Errors by type, owlv2: ΔAP50 if fixed (AP points)" in text
    assert text.index("## AP50:95 (%)") < text.index("### Errors by type") < text.index("## Runs")


def test_tables_of_a_whole_matrix_are_those_written_before_they_were_made_linear():
    """Two models on the 100 datasets (201 rows, one dataset scored again): Table 2, the
    leaderboard and the errors by type, byte for byte as the quadratic means wrote them."""
    rows = catalogue_rows()
    tables = [ap_table(rows), leaderboard(rows), *error_tables(rows).values()]
    assert "\n".join(f"{t.title}\n\n{render(t, 'md')}" for t in tables) == CATALOGUE_TABLES.read_text(encoding="utf-8")


def test_csv_and_latex_hold_the_same_numbers(rows):
    table = ap_table(rows, "ap50")
    parsed = list(csv.reader(io.StringIO(render(table, "csv"))))
    assert parsed[0] == ["Dataset", "Domain", "owlv2", "gdino"]
    assert parsed[1] == ["bees", "Flora & Fauna", "60.0", "50.0"] and parsed[3][3] == ""
    latex = render(table, "latex")
    assert "bees & Flora \\& Fauna & 60.0 & 50.0 \\\\" in latex
    assert "\\textbf{All} & mean & 61.5 & 50.0 \\\\" in latex and latex.count("\\midrule") == 2


def test_leaderboard_has_the_seven_domains_and_all_best_first(rows):
    table = leaderboard(rows)
    assert table.header == ["Model", "Aerial", "Document", "Flora & Fauna", "Industrial", "Medical", "Sports",
                            "Other", "custom", "All"]
    assert [row[0] for row in table.rows] == ["owlv2", "gdino"]


def test_two_prompt_modes_of_one_model_get_two_columns(rows):
    extra = detection_row("owlv2", "bees", 50.0, prompt="instructions")
    assert ap_table([*rows, extra]).header[2:] == ["owlv2 [names]", "gdino [names]", "owlv2 [instructions]"]


def test_per_class_tables_escape_and_count_instances(rows):
    (bees, *_) = per_class_tables(rows)
    assert bees.title == "bees: AP50:95 per class (%)"
    md = render(bees, "md")
    assert "| y \\| z | 0 | — | — |" in md and "| x | 7 | 40.0 | 30.0 |" in md


def test_uouo_table_1(rows):
    grounding = [uouo_row("oracle", "uouo-mmd", 1.0, 1.0), uouo_row("clip", "uouo-random", 0.5, 0.25)]
    lines = render(uouo_table(grounding), "md").splitlines()
    assert lines[2:] == ["| oracle (smoke) | 1.0000 | — | 1.0000 | — |",  # the factory's UOUO rows are smoke
                         "| clip (smoke) | — | 0.5000 | — | 0.2500 |"]


def test_two_sessions_give_the_table_of_one_session_that_ran_both(tmp_path, rows):
    first, second = rows[:3], rows[3:]
    for row in second:
        row["run_id"], row["timestamp"] = "run-b", "2025-05-02T10:00:00+00:00"
    one = write_jsonl(tmp_path / "one", first + second)
    a, b = write_jsonl(tmp_path / "a", first), write_jsonl(tmp_path / "b", second)
    assert summary(select(read_results([a, b]))) == summary(select(read_results([one])))
    assert render(ap_table(select(read_results([b, a]))), "md") == render(ap_table(select(read_results([one]))), "md")


def test_summary_header_says_what_ran(rows):
    rows[0]["command"] = "pytest --rf100vl-model owlv2"
    rows[1]["smoke"] = True
    rows[2]["reused_from"] = "run-0"
    text = summary(rows, [("Checks of means", ["- PASSED: owlv2 on All"])], ["plots/heatmap.png"])
    assert "- splits: test\n- prompt modes: names\n- date: 2025-05-01\n- runs: run-a\n" in text
    assert "- checkpoints: owlv2: ckpt/owlv2 @ abc123; gdino: ckpt/gdino @ abc123" in text
    assert "- command: `pytest --rf100vl-model owlv2`" in text
    assert "- smoke rows (random weights or a replay of them): owlv2 on fish-market-ggjso" in text
    assert "- reused from earlier runs: owlv2 on actions (from run-0)" in text
    assert "- gdino on bees: unknown label 3" in text
    assert "![heatmap](plots/heatmap.png)" in text
    assert text.rstrip().endswith("## Checks of means\n\n- PASSED: owlv2 on All")


def test_parquet_round_trips_per_class_and_answer_counts(tmp_path, rows):
    rows = [dict(rows[0], **error_columns(1.0)), *rows[1:]]
    grounding = [dict(uouo_row("oracle", "uouo-mmd", 1.0, 1.0), iou_histogram=[0] * 9 + [8], iou_median=1.0,
                      quadrant_confusion=[{"truth": "top-left", "answer": "no answer", "count": 8}])]
    write_parquet(rows + grounding, tmp_path / "r.parquet")
    back = read_parquet(tmp_path / "r.parquet")
    for original, read in zip(rows + grounding, back):
        assert {k: read[k] for k in original} == original
    assert back[4]["per_class"][0] == {"class": "x", "ap": 30.0, "ap50": 50.0, "n_instances": 7}
    assert back[4]["answer_counts"] == {"unknown label": 3} and back[0]["answer_counts"] is None


WRITE_WITHOUT_PANDAS = """
import math, sys
from rf100vl_hf.results.folder import write_parquet
from tests.results.factory import detection_row
first = detection_row("owlv2", "bees", float("nan"), host="node-7", finished="2025-05-01T10:00:00+00:00", mixed=1,
                      nested={"a": [1, 2]})
write_parquet([first, detection_row("owlv2", "actions", 40.0, mixed="x", nested={"b": "s"})], sys.argv[1])
print(sorted({"pandas", "pyarrow"} & set(sys.modules)))
"""


def test_parquet_is_written_without_pandas_and_types_undeclared_columns_from_their_values(tmp_path):
    """Arrow's JSON reader builds the table (pa.array over Python objects would import pandas):
    a text that looks like a date stays text, a column of mixed kinds is kept as JSON text, a
    mapping is a struct, NaN stays NaN."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    path = tmp_path / "r.parquet"
    done = subprocess.run([sys.executable, "-c", WRITE_WITHOUT_PANDAS, str(path)], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2], check=True)
    assert done.stdout.split() == ["['pyarrow']"]
    table = pq.read_table(path)
    types = {name: str(table.schema.field(name).type) for name in ("finished", "mixed", "nested", "host", "ap")}
    assert types == {"finished": "string", "mixed": "string", "nested": "struct<a: list<element: int64>, b: string>",
                     "host": "string", "ap": "double"}
    columns = table.to_pydict()
    assert columns["mixed"] == ["1", '"x"'] and columns["finished"][0] == "2025-05-01T10:00:00+00:00"
    assert math.isnan(columns["ap"][0]) and columns["nested"][1] == {"a": None, "b": "s"}


def test_write_summary_writes_both_files(tmp_path, rows):
    write_summary(tmp_path, rows)
    assert (tmp_path / "summary.md").read_text().startswith("# rf100vl results")
    assert len(read_parquet(tmp_path / "results.parquet")) == len(rows)


def test_plots_are_png_files(tmp_path, rows):
    from rf100vl_hf.results.plots import write_plots

    paths = write_plots(rows, tmp_path)
    assert [p.name for p in paths] == ["domain_means.png", "heatmap.png", "per_class_bees.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
