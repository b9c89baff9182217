"""The results repository on the (stand-in) Hub: append-and-merge, racing pushes, faults with
clear one-line errors in bounded time and local files untouched, and smoke rows marked.
(Evaluation results for model repositories: ``tests/hub/test_eval_results.py``.)"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import pytest

from rf100vl_hf.hub import results_repo
from rf100vl_hf.hub.auth import HubAuthError
from rf100vl_hf.hub.results_repo import push_results
from rf100vl_hf.network import HubError
from rf100vl_hf.results import ap_table, read_results, render, select

from tests.results.factory import detection_row, error_columns, uouo_row, write_jsonl

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")


def machine(tmp_path: Path, name: str, spec: str, aps: dict[str, float], day: int = 1) -> Path:
    """A results folder as one machine's session leaves it, with its prediction files."""
    folder = tmp_path / name
    rows = [detection_row(spec, dataset, ap, run_id=f"run-{name}", timestamp=f"2025-05-0{day}T10:00:00+00:00",
                          predictions_file=str(folder / "predictions" / spec / dataset / "test.json"))
            for dataset, ap in aps.items()]
    for row in rows:
        Path(row["predictions_file"]).parent.mkdir(parents=True, exist_ok=True)
        Path(row["predictions_file"]).write_text("[]")
    return write_jsonl(folder, rows)


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def loaded(repo_id: str, config: str = "rf100vl") -> list[dict]:
    from datasets import load_dataset

    return load_dataset(repo_id, config, split="train", download_mode="force_redownload").to_list()


def test_two_machines_pushed_give_one_repository_with_the_union(hub_server, tmp_path):
    a = machine(tmp_path, "a", "owlv2", {"bees": 40.0, "actions": 30.0})
    b = machine(tmp_path, "b", "gdino", {"bees": 20.0}, day=2)
    write_jsonl(tmp_path / "u", [uouo_row("oracle", "uouo-mmd", 1.0, 1.0)])
    push_results([a], "org/results", token=hub_server.token)
    pushed = push_results([b, tmp_path / "u"], "org/results", token=hub_server.token)
    assert pushed.rows == 4
    rows = loaded("org/results")
    assert sorted((r["spec"], r["dataset"], r["ap"]) for r in rows) == [
        ("gdino", "bees", 20.0), ("owlv2", "actions", 30.0), ("owlv2", "bees", 40.0)]
    assert rows[0]["per_class"][0] == {"class": "x", "ap": rows[0]["ap"], "ap50": rows[0]["ap50"], "n_instances": 7}
    assert {r["predictions_file"] for r in rows} == {"predictions/owlv2/bees/test.json",
                                                       "predictions/owlv2/actions/test.json",
                                                       "predictions/gdino/bees/test.json"}
    assert [r["dataset"] for r in loaded("org/results", "uouo")] == ["uouo-mmd"]
    files = hub_server.files("org/results")
    card = files["README.md"].decode()
    local = render(ap_table(select(read_results([a, b]))), "md")
    assert local in card  # the card's table is `rf100vl-hf results table`
    assert "| owlv2 | — | — | 40.0 | — | — | 30.0 | — | 35.0 |" in card  # leaderboard: models x domains
    assert {"plots/domain_means.png", "plots/heatmap.png", "plots/per_class_bees.png"} <= set(files)
    assert "![heatmap](plots/heatmap.png)" in card


def test_the_repository_is_the_same_whichever_machine_pushes_last(hub_server, tmp_path):
    """Two machines' pushes land in either order (they race): the rows and the card come out the
    same, the models in the order they were measured."""
    a = machine(tmp_path, "a", "owlv2", {"bees": 40.0})
    b = machine(tmp_path, "b", "gdino", {"bees": 20.0}, day=2)
    for repo, order in (("org/b-last", (a, b)), ("org/a-last", (b, a))):
        for folder in order:
            push_results([folder], repo, token=hub_server.token)
    cards = [hub_server.files(repo)["README.md"].decode() for repo in ("org/a-last", "org/b-last")]
    assert "| Dataset | Domain | owlv2 | gdino |" in cards[0]
    assert cards[0].replace("org/a-last", "REPO") == cards[1].replace("org/b-last", "REPO")
    assert [r["spec"] for r in loaded("org/a-last")] == [r["spec"] for r in loaded("org/b-last")] == ["owlv2", "gdino"]


def test_a_later_row_replaces_its_identity_and_nothing_else_goes(hub_server, tmp_path):
    push_results([machine(tmp_path, "a", "owlv2", {"bees": 40.0, "actions": 30.0})], "org/merge", token=hub_server.token)
    push_results([machine(tmp_path, "b", "owlv2", {"bees": 45.0}, day=3)], "org/merge", token=hub_server.token)
    assert sorted((r["dataset"], r["ap"], r["run_id"]) for r in loaded("org/merge")) == [
        ("actions", 30.0, "run-a"), ("bees", 45.0, "run-b")]


def test_racing_pushes_keep_both_rows(hub_server, tmp_path, monkeypatch):
    push_results([machine(tmp_path, "seed", "seed", {"bees": 1.0})], "org/race", token=hub_server.token)
    both_read = threading.Barrier(2, timeout=20)
    reads = []
    original = results_repo.remote_rows

    def read_then_wait(*args, **kwargs):
        rows = original(*args, **kwargs)
        reads.append(args[2])
        if len(reads) <= 2:
            both_read.wait()  # the first reads of both pushes see the same parent commit
        return rows

    monkeypatch.setattr(results_repo, "remote_rows", read_then_wait)
    folders = [machine(tmp_path, "a", "owlv2", {"bees": 40.0}), machine(tmp_path, "b", "gdino", {"bees": 20.0})]
    outcomes = [None, None]

    def push(i):
        outcomes[i] = push_results([folders[i]], "org/race", token=hub_server.token)

    threads = [threading.Thread(target=push, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert reads[0] == reads[1] and len(reads) == 3
    assert sorted(o.attempts for o in outcomes) == [1, 2]  # one was refused (412), merged again, retried
    assert sorted(r["spec"] for r in loaded("org/race")) == ["gdino", "owlv2", "seed"]


def test_a_repository_that_keeps_changing_stops_after_bounded_attempts(hub_server, tmp_path):
    folder = machine(tmp_path, "a", "owlv2", {"bees": 40.0})
    hub_server.fail("commit", 412)
    try:
        with pytest.raises(HubError, match="kept changing during 3 attempts; push again"):
            push_results([folder], "org/busy", token=hub_server.token, max_attempts=3)
    finally:
        hub_server.clear_faults()


@pytest.mark.parametrize("fault", ["down", "500", "hang", "token"])
def test_a_failed_push_is_one_clear_line_in_bounded_time_and_a_retry_works(hub_server, tmp_path, fault):
    folder = machine(tmp_path, "a", "owlv2", {"bees": 40.0})
    before = snapshot(folder)
    repo = f"org/fault-{fault}"
    expected = {"down": r"cannot reach http://127\.0\.0\.1:\d+ \(ConnectError",
                "500": r"answered 500 \(failed on its side: retry later\): injected fault: POST /api/datasets/org/fault-500/commit/main answers 500",
                "hang": r"did not answer within 1 s \(set \$RF100VL_HUB_TIMEOUT to wait longer\)",
                "token": r"rejected the token \(401"}[fault]
    start = time.monotonic()
    if fault == "down":
        with hub_server.down(), pytest.raises(HubError, match=expected) as caught:
            push_results([folder], repo, token=hub_server.token, timeout=1)
    else:
        if fault in ("500", "hang"):
            (hub_server.fail if fault == "500" else hub_server.hang)("commit", *([500] if fault == "500" else []))
        token = "hf_wrong" if fault == "token" else hub_server.token
        try:
            with pytest.raises((HubError, HubAuthError), match=expected) as caught:
                push_results([folder], repo, token=token, timeout=1)
        finally:
            hub_server.clear_faults()
    assert time.monotonic() - start < 15
    assert "\n" not in str(caught.value)
    assert snapshot(folder) == before
    assert push_results([folder], repo, token=hub_server.token).rows == 1
    assert snapshot(folder) == before


def test_with_predictions_uploads_the_files_and_the_rows_carry_the_error_columns(hub_server, tmp_path):
    folder = machine(tmp_path, "a", "owlv2", {"bees": 40.0})
    (row,) = read_results([folder])
    matrix = Path(row["predictions_file"]).with_name("test.confusion.csv")
    matrix.write_text("truth \\ predicted,x,background\nx,3,1\nbackground,2,0\n", encoding="utf-8")
    write_jsonl(folder, [{**row, **error_columns(1.0), "confusion_file": str(matrix)}])
    pushed = push_results([folder], "org/with-predictions", token=hub_server.token, with_predictions=True)
    assert pushed.predictions == 2
    path = "predictions/run-a/owlv2/bees/test.json"
    assert hub_server.files("org/with-predictions")[path] == b"[]"
    assert hub_server.files("org/with-predictions")[path.replace(".json", ".confusion.csv")].startswith(b"truth")
    (pushed_row,) = loaded("org/with-predictions")
    assert pushed_row["predictions_file"] == path
    assert pushed_row["confusion_file"] == path.replace(".json", ".confusion.csv")
    assert {key: pushed_row[key] for key in error_columns(1.0) if key != "confusion_file"} == {
        key: value for key, value in error_columns(1.0).items() if key != "confusion_file"}


def test_a_server_without_xet_gets_the_results_through_lfs(hub_server, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)  # hf_xet is installed: huggingface_hub would use it
    folder = machine(tmp_path, "a", "owlv2", {"bees": 40.0})
    assert push_results([folder], "org/no-xet", token=hub_server.token).rows == 1
    assert ("GET", "/api/datasets/org/no-xet/xet-write-token/main", 404) in hub_server.requests
    assert "rf100vl/results.parquet" in hub_server.files("org/no-xet")


def test_the_leaderboard_marks_smoke_rows():
    rows = [detection_row("owlv2", "bees", 40.0), detection_row("owlv2:tiny", "bees", 1.0, smoke=True),
            uouo_row("oracle", "uouo-mmd", 1.0, 1.0)]
    card = results_repo.card_text("org/results", rows, [])
    assert "**Models marked (smoke): random weights, scores mean nothing.**" in card
    board = card.split("## Leaderboard", 1)[1]
    assert "| owlv2:tiny (smoke) |" in board and "| owlv2 |" in board and "| oracle (smoke) |" in board
