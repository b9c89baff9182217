"""Reading results folders: torn lines, bad lines, identity, latest row wins, run selection."""

from __future__ import annotations

import json

import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.results import IDENTITY, SelectionError, identity, latest, read_results, select
from rf100vl_hf.results.rows import JsonlTail, TornLineWarning

from tests.results.factory import detection_row, write_jsonl


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path):
    folder = write_jsonl(tmp_path / "a", [detection_row("m", "bees", 1.0)], torn='{"run_id": "x", "ap": 3')
    with pytest.warns(TornLineWarning, match=r"results.jsonl: line 2: cut short"):
        rows = read_results([folder])
    assert [row["ap"] for row in rows] == [1.0]


ROW = '{"benchmark": "rf100vl", "dataset": "bees", "model": "m"}'
"""The least a row may hold."""


def test_a_followed_file_gives_each_appended_row_once_and_waits_for_a_line_being_written(tmp_path):
    path = tmp_path / "results.jsonl"
    tail = JsonlTail(path)
    assert tail.new_rows() == []  # not written yet
    path.write_text(f"{ROW}\n")
    assert [row["dataset"] for row in tail.new_rows()] == ["bees"]
    with path.open("a") as handle:
        handle.write(ROW.replace("bees", "ants") + '\n{"benchmark": "rf100vl", "data')  # the next row half-written
    assert [row["dataset"] for row in tail.new_rows()] == ["ants"]
    with path.open("a") as handle:
        handle.write('set": "wasps", "model": "m"}\n')
    assert [row["dataset"] for row in tail.new_rows()] == ["wasps"] and tail.new_rows() == []
    with path.open("a") as handle:
        handle.write("not json\n")
    with pytest.raises(DataError) as caught:
        tail.new_rows()
    assert caught.value.field == "line 4"  # numbered as in the whole file


@pytest.mark.parametrize(("content", "field"), [
    (f'{ROW}\nnot json\n{ROW}\n', "line 2"),
    (f'{ROW}\n{{"a": \n', "line 2"),  # complete line (it has its break): not torn
    ('[1, 2]\n', "line 1"),
    ('[' * 100000 + '\n', "line 1"),  # nested too deep for the parser
])
def test_a_bad_line_names_the_file_and_the_line(tmp_path, content, field):
    (tmp_path / "results.jsonl").write_text(content)
    with pytest.raises(DataError) as caught:
        read_results([tmp_path])
    assert caught.value.field == field and caught.value.path.endswith("results.jsonl")


def test_a_folder_without_results_is_named(tmp_path):
    with pytest.raises(DataError, match="results.jsonl: missing: not a results folder"):
        read_results([tmp_path])


def test_identity_ignores_when_and_missing_keys_are_none():
    row = detection_row("m", "bees", 1.0)
    assert identity(row) == identity({**row, "run_id": "other", "timestamp": "2030-01-01T00:00:00+00:00", "ap": 9})
    assert identity({"dataset": "bees"}) == tuple(
        {"dataset": "bees", "protocol": "paper"}.get(key) for key in IDENTITY)  # a row of before protocols: paper
    assert identity(row) != identity({**row, "prompt": "instructions"})
    assert identity({**row, "protocol": "paper"}) == identity(row) != identity({**row, "protocol": "rf-scripts"})


def test_the_latest_row_per_identity_wins_whatever_the_reading_order():
    old = detection_row("m", "bees", 1.0, run_id="r1", timestamp="2025-05-01T10:00:00+00:00")
    new = detection_row("m", "bees", 2.0, run_id="r2", timestamp="2025-05-02T09:00:00+02:00")
    other = detection_row("m", "actions", 5.0, run_id="r1", timestamp="2025-05-01T10:00:00+00:00")
    assert [r["ap"] for r in latest([new, old, other])] == [2.0, 5.0]
    assert [r["ap"] for r in latest([old, other, new])] == [5.0, 2.0]


def test_select_one_run_the_latest_run_or_all():
    rows = [detection_row("m", "bees", 1.0, run_id="r1", timestamp="2025-05-01T10:00:00+00:00"),
            detection_row("m", "actions", 2.0, run_id="r2", timestamp="2025-05-03T10:00:00+00:00"),
            detection_row("m", "bees", 3.0, run_id="r3", timestamp="2025-05-02T10:00:00+00:00")]
    assert [r["ap"] for r in select(rows)] == [2.0, 3.0]
    assert [r["ap"] for r in select(rows, latest_run=True)] == [2.0]
    assert [r["ap"] for r in select(rows, run="r1")] == [1.0]
    with pytest.raises(SelectionError, match="no rows of run 'r9'; runs found: r1, r3, r2"):
        select(rows, run="r9")


def test_rows_read_back_exactly_as_written(tmp_path):
    rows = [detection_row("m", "bees", float("nan"), answer_counts={"unknown": 2})]
    folder = write_jsonl(tmp_path, rows)
    (back,) = read_results([folder / "results.jsonl"])
    assert json.dumps({key: back[key] for key in rows[0]}) == json.dumps(rows[0])


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda row: row.pop("dataset"), "dataset", "a results row needs dataset (a string)"),
    (lambda row: row.pop("benchmark"), "benchmark", "a results row needs benchmark (a string)"),
    (lambda row: row.update(model=None, spec=None), "model", "a results row needs model (a string)"),
    (lambda row: row.update(dataset=7), "dataset", "a results row needs dataset (a string), got 7"),
    (lambda row: row.update(per_class="oops"), "per_class", "expected a list of {class, ap, ap50, n_instances}"),
    (lambda row: row.update(per_class=[{"ap": 1.0}]), "per_class[0]", "expected an object with a class name"),
])
def test_a_row_without_what_every_table_needs_names_the_file_line_and_field(tmp_path, change, field, words):
    from rf100vl_hf.cli import main

    bad = detection_row("m", "bees", 10.0)
    change(bad)
    write_jsonl(tmp_path, [detection_row("m", "sample", 12.0), bad])
    with pytest.raises(DataError) as error:
        read_results([tmp_path])
    assert (error.value.field, error.value.path) == (f"line 2: {field}", str(tmp_path / "results.jsonl"))
    assert words in str(error.value)
    for command in (["results", "table", str(tmp_path), "--option", "per-class=true"], ["results", "summary", str(tmp_path)]):
        assert main(command) == 2  # a one-line error, not a traceback from the tables
