"""``rf100vl-hf results``: each command's output, and one-line errors with exit status 2."""

from __future__ import annotations

import pytest

from rf100vl_hf.cli import main
from rf100vl_hf.results import read_parquet

from tests.results.factory import detection_row, uouo_row, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's upload


@pytest.fixture
def folders(tmp_path):
    a = write_jsonl(tmp_path / "a", [detection_row("owlv2", "bees", 40.0), detection_row("owlv2", "actions", 20.0)])
    b = write_jsonl(tmp_path / "b", [detection_row("gdino", "bees", 10.0, run_id="run-b",
                                                   timestamp="2025-05-02T10:00:00+00:00"),
                                     uouo_row("oracle", "uouo-mmd", 1.0, 1.0, run_id="run-b",
                                              timestamp="2025-05-02T10:00:00+00:00")])
    return a, b


def test_summary_rebuilds_summary_parquet_and_figures(folders, tmp_path, capsys):
    assert main(["results", "summary", *map(str, folders), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "- runs: run-a, run-b" in text and "![heatmap](plots/heatmap.png)" in text
    assert (tmp_path / "out" / "plots" / "heatmap.png").is_file()
    assert len(read_parquet(tmp_path / "out" / "results.parquet")) == 4
    assert "(4 rows)" in capsys.readouterr().out


def test_table_prints_table_2_and_table_1(folders, capsys):
    assert main(["results", "table", *map(str, folders), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "## AP50:95 (%)" in out and "| bees | Flora & Fauna | 40.0 | 10.0 |" in out
    assert "| oracle (smoke) | 1.0000 | — | 1.0000 | — |" in out
    assert main(["results", "table", *map(str, folders), "--format", "csv", "--option", "per-class=true", "--run", "latest",
                 "--option", "benchmark=rf100vl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Dataset,Class,Instances,Model,AP50:95 per class (%)\nbees,x,7,gdino,10.0\n")


def test_csv_is_one_table_of_one_benchmark(folders, capsys):
    import csv
    import io

    argv = ["results", "table", *map(str, folders), "--format", "csv"]
    assert main([*argv, "--option", "per-class=true", "--option", "benchmark=rf100vl"]) == 0
    parsed = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert parsed[0] == ["Dataset", "Class", "Instances", "Model", "AP50:95 per class (%)"]
    assert all(len(row) == 5 for row in parsed[1:]) and ["bees", "x", "7", "owlv2", "40.0"] in parsed
    assert main([*argv, "--option", "benchmark=uouo"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "Model,mIoU mmd,mIoU random,accuracy mmd,accuracy random"
    assert main(argv) == 2
    assert "choose one with --benchmark rf100vl or --benchmark uouo" in capsys.readouterr().err


def test_smoke_rows_are_marked_in_every_format_and_no_smoke_leaves_them_out(tmp_path, capsys):
    folder = write_jsonl(tmp_path / "r", [detection_row("owlv2", "bees", 40.0),
                                          detection_row("predictions:/runs/2025/oracle", "bees", 99.0, smoke=True)])
    for fmt, header in [("md", "| Dataset | Domain | owlv2 | replay(oracle) (smoke) |"),
                        ("csv", "Dataset,Domain,owlv2,replay(oracle) (smoke)"),
                        ("latex", "Dataset & Domain & owlv2 & replay(oracle) (smoke) \\\\")]:
        assert main(["results", "table", str(folder), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert header in out.splitlines()
        assert ("(smoke): random weights, scores mean nothing" in out) == (fmt != "csv")
    assert main(["results", "table", str(folder), "--format", "csv", "--option", "no-smoke=true"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Dataset,Domain,owlv2" and "99.0" not in out


def test_plot_writes_the_figures(folders, tmp_path, capsys):
    assert main(["results", "plot", *map(str, folders), "--out", str(tmp_path / "plots"), "--option", "dataset=actions"]) == 0
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "domain_means.png", "heatmap.png", "per_class_actions.png"]


@pytest.mark.parametrize(("argv", "message"), [
    (["summary", "{a}", "{b}"], "--out: several folders given"),
    (["table", "{empty}"], "results.jsonl: missing: not a results folder"),
    (["table", "{a}", "--run", "nope"], "no rows of run 'nope'; runs found: run-a"),
    (["plot", "{a}", "--out", "{empty}", "--option", "dataset=nope"], "--dataset: no rows of dataset 'nope'"),
    (["eval-results", "{a}", "--benchmark", "org/rf100vl"], "--model-repo: give the model repository"),
    (["eval-results", "{a}", "{b}", "--benchmark", "org/rf100vl", "--out", "{empty}"], "several models"),
])
def test_bad_input_is_one_line_and_exit_2(folders, tmp_path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    names = {"a": folders[0], "b": folders[1], "empty": tmp_path / "empty"}
    assert main(["results", *(arg.format(**names) for arg in argv)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("rf100vl-hf: error: ")


def test_a_bad_line_is_exit_2(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_text('{"benchmark": "rf100vl", "dataset": "bees", "model": "m"}\nnot json\n')
    assert main(["results", "table", str(tmp_path)]) == 2
    assert "results.jsonl: line 2: not JSON" in capsys.readouterr().err


def test_push_with_the_server_down_is_one_line_and_exit_2(folders, hub_server, capsys):
    with hub_server.down():
        assert main(["results", "push", str(folders[0]), "--repo-id", "org/x", "--option", f"token={hub_server.token}"]) == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "error" in line]
    assert "Traceback" not in err and "cannot reach" in line
    assert main(["results", "push", str(folders[0]), "--repo-id", "org/x", "--option", f"token={hub_server.token}"]) == 0
    assert "(2 rows in the repository)" in capsys.readouterr().out


def test_a_token_the_hub_echoes_is_never_printed(folders, hub_server, capsys, monkeypatch):
    """HF_TOKEN, which the Hub's error repeats in three forms: one line, every form masked."""
    from tests.support.hub_server import _Handler, echo_token

    monkeypatch.setattr(_Handler, "do_commit", echo_token)
    monkeypatch.setenv("HF_TOKEN", hub_server.token)
    assert main(["results", "push", str(folders[0]), "--repo-id", "org/echoed-token"]) == 2
    out, err = capsys.readouterr()
    (line,) = [line for line in err.splitlines() if "error" in line]
    assert "refused for token *** (as *** and ***)" in line and "standin" not in out + err


def test_eval_results_writes_entries(folders, tmp_path, capsys):
    from rf100vl_hf.hub.eval_results import check_eval_file

    argv = ["results", "eval-results", str(folders[0]), "--benchmark", "org/rf100vl", "--option", "partial=true",
            "--option", "source=org/results", "--out", str(tmp_path / "model")]
    assert main(argv) == 2  # partial means are not results
    assert "--option allow-unofficial=true" in capsys.readouterr().err
    assert main([*argv, "--option", "allow-unofficial=true"]) == 0
    entries = check_eval_file(tmp_path / "model" / ".eval_results" / "rf100vl.yaml")
    assert {e.task_id for e in entries} >= {"all", "flora-fauna", "sports", "bees", "actions"}
    assert {e.notes for e in entries if e.task_id == "all"} == {"partial: 2 of 100 datasets"}
    assert entries[0].source_url.endswith("/datasets/org/results")
