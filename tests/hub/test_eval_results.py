"""A model's evaluation results: only results are written (smoke, limited and partial rows
need ``--allow-unofficial`` and are noted), the rows' checkpoint must be the model repository,
a push fills the benchmark's revision and the attribution, updates its own open pull request,
and ``hub-status`` reads back what the (stand-in) Hub made of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from huggingface_hub import HfApi

from rf100vl_hf.cli import main
from rf100vl_hf.hub.eval_publish import publish_eval_results
from rf100vl_hf.hub.eval_results import (
    SMOKE_NOTE,
    ModelRepoMismatchError,
    UnofficialResultsError,
    check_eval_file,
    check_model_repo,
    eval_files,
    write_eval_files,
)
from rf100vl_hf.hub.eval_status import hub_status, status_lines
from rf100vl_hf.hub.eval_yaml import UnregisteredFrameworkWarning, rf100vl_eval_yaml, uouo_eval_yaml, write_eval_yaml

from tests.results import factory
from tests.results.factory import detection_row, uouo_row, write_jsonl

pytestmark = [pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::rf100vl_hf.hub.eval_yaml.UnregisteredFrameworkWarning")]

DATASETS = ["actions", "bees", "fish-market-ggjso"]  # the factory's datasets (the last is not a catalogue one)


def rows_of(checkpoint: str = "org/owl", aps: tuple[float, ...] = (30.0, 40.0, 50.0), **extra) -> list[dict]:
    return [detection_row("owlv2", name, ap, checkpoint=checkpoint, **extra) for name, ap in zip(DATASETS, aps)]


def real_uouo(dataset: str, miou: float, accuracy: float) -> dict:
    return {**uouo_row("owlv2", dataset, miou, accuracy), "smoke": False, "checkpoint": "org/owl"}


def files_at(hub, repo: str, revision: str = "main") -> dict[str, list[dict]]:
    return {path: yaml.safe_load(data) for path, data in hub.files(repo, revision, repo_type="model").items()
            if path.startswith(".eval_results/")}


@pytest.fixture(scope="module")
def bench_repo(hub_server, tmp_path_factory) -> str:
    """``org/bench``: a benchmark of the factory's three datasets (a card listing them, and the
    eval.yaml an export writes), and the model repository ``org/owl``."""
    folder = tmp_path_factory.mktemp("bench")
    card = {"configs": [{"config_name": n, "data_files": [{"split": "test", "path": f"{n}/test-*"}]} for n in DATASETS]}
    (folder / "README.md").write_text(f"---\n{yaml.safe_dump(card)}---\n# bench\n")
    write_eval_yaml(folder, rf100vl_eval_yaml(DATASETS))
    api = HfApi(token=hub_server.token)
    api.create_repo("org/bench", repo_type="dataset")
    api.upload_folder(repo_id="org/bench", repo_type="dataset", folder_path=folder)
    api.create_repo("org/owl")
    return "org/bench"


@pytest.fixture
def registered(hub_server, monkeypatch):
    """The stand-in Hub lists ``rf100vl-hf``, as the Hub will once the huggingface.js pull request is merged."""
    monkeypatch.setattr(hub_server, "frameworks", hub_server.frameworks | {"rf100vl-hf"})


# ---------------------------------------------------------------- entries from results only


def test_entries_are_the_datasets_and_the_covered_means_and_parse_back(tmp_path, monkeypatch):
    from rf100vl_hf import catalog

    aerial = [entry.basename for entry in catalog.select(domain="Aerial")]
    for name in aerial:
        monkeypatch.setitem(factory.DATASETS, name, "Aerial")
    rows = [detection_row("owlv2", name, 10.0 + i, prompt="instructions") for i, name in enumerate(aerial)]
    rows += [real_uouo("uouo-mmd", 0.5, 0.75)]
    rf100vl, uouo = eval_files(rows, "org/rf100vl", benchmark_revision="a" * 40)
    assert rf100vl.name == "rf100vl_instructions"
    values = {e.task_id: e.value for e in rf100vl.entries}
    assert values == {"aerial": round(sum(10.0 + i for i in range(len(aerial))) / len(aerial), 2),
                      **{name: 10.0 + i for i, name in enumerate(aerial)}}
    assert rf100vl.skipped["all"] == f"{len(aerial)} of 100 datasets scored"
    assert {e.notes for e in rf100vl.entries} == {"prompt mode: instructions"}
    assert [(e.task_id, e.value) for e in uouo.entries] == [("mmd", 0.5), ("mmd-quadrant", 0.75)]
    declared = {t["id"] for t in rf100vl_eval_yaml([e.basename for e in catalog.select()])["tasks"]}
    declared |= {t["id"] for t in uouo_eval_yaml()["tasks"]}
    for path in write_eval_files([rf100vl, uouo], tmp_path):
        entries = check_eval_file(path)
        assert {e.task_id for e in entries} <= declared and {e.dataset_revision for e in entries} == {"a" * 40}
        assert "date: '2025-05-01T10:00:00+00:00'" in path.read_text()  # quoted: YAML would read a datetime


def test_a_smoke_row_is_refused_and_written_with_the_override_and_its_notes():
    rows = rows_of(smoke=True)
    with pytest.raises(UnofficialResultsError, match=r"3 smoke row\(s\) \(random weights: the score means nothing\) "
                                                     r"on actions, bees, fish-market-ggjso.*--option allow-unofficial=true writes "
                                                     "them with notes"):
        eval_files(rows, "org/bench")
    (file,) = eval_files(rows, "org/bench", allow_unofficial=True)
    assert file.entries and all(e.notes.startswith(SMOKE_NOTE) for e in file.entries)
    uouo = [{**uouo_row("oracle", "uouo-mmd", 1.0, 1.0)}]  # the factory's UOUO rows are smoke rows
    with pytest.raises(UnofficialResultsError, match="1 smoke row"):
        eval_files(uouo, "org/uouo")


def test_limited_rows_are_refused_unless_a_full_row_covers_them():
    full, limited = detection_row("owlv2", "bees", 40.0), detection_row("owlv2", "actions", 90.0, limit=5)
    with pytest.raises(UnofficialResultsError, match=r"1 row\(s\) of a limited run \(--rf100vl-limit.*on actions"):
        eval_files([full, limited], "org/bench")
    (file,) = eval_files([full, limited], "org/bench", allow_unofficial=True)
    assert {e.task_id: e.notes for e in file.entries}["actions"] == "limited run: the first 5 images of each split"
    covered = detection_row("owlv2", "bees", 99.0, limit=5)  # the full row of bees supersedes it
    (file,) = eval_files([full, covered], "org/bench")
    assert {e.task_id: e.value for e in file.entries} == {"bees": 40.0}


def test_partial_means_are_unofficial():
    rows = rows_of(checkpoint="ckpt/owlv2")
    with pytest.raises(UnofficialResultsError, match=r"partial means over part of the datasets of all, rf20vl, "
                                                     "flora-fauna and 1 more"):
        eval_files(rows, "org/bench", partial=True)
    (file,) = eval_files(rows, "org/bench", partial=True, allow_unofficial=True)
    notes = {e.task_id: e.notes for e in file.entries}
    assert notes["all"] == "partial: 2 of 100 datasets" and notes["bees"] is None
    (official,) = eval_files(rows, "org/bench")  # without --partial, partly covered means are left out
    assert {e.task_id for e in official.entries} == set(DATASETS)


def test_two_measurements_of_a_dataset_make_no_score():
    rows = [detection_row("owlv2", "bees", 40.0), detection_row("owlv2", "bees", 42.0, dtype="float16")]
    with pytest.raises(Exception, match=r"two measurements of owlv2 on bees \(they differ in dtype\).*--run"):
        eval_files(rows, "org/bench")


def test_a_row_of_another_checkpoint_is_refused_for_the_model_repository(hub_server, bench_repo):
    files = eval_files(rows_of(checkpoint="google/owlv2-base-patch16-ensemble"), bench_repo)
    with pytest.raises(ModelRepoMismatchError, match=r"the rows of owlv2 measured checkpoint "
                                                     r"google/owlv2-base-patch16-ensemble, not org/owl.*"
                                                     r"--option model-repo-mismatch-ok=true"):
        check_model_repo(files, "org/owl")
    check_model_repo(files, "org/owl", mismatch_ok=True)
    check_model_repo(files, "Google/OWLv2-base-patch16-ensemble")  # Hub ids compare without case
    start = len(hub_server.requests)
    with pytest.raises(ModelRepoMismatchError):
        publish_eval_results(files, "org/owl", bench_repo, token=hub_server.token)
    assert hub_server.requests[start:] == []  # refused before asking the Hub anything
    replay = eval_files([detection_row("predictions:/runs/a", "bees", 40.0, checkpoint=None)], bench_repo)
    with pytest.raises(ModelRepoMismatchError, match=r"measured checkpoint \(none recorded\), not org/owl"):
        check_model_repo(replay, "org/owl")


def test_the_command_names_the_flags_that_override(tmp_path, capsys):
    folder = write_jsonl(tmp_path / "smoke", rows_of(checkpoint="google/owlv2", smoke=True))
    base = ["results", "eval-results", str(folder), "--benchmark", "org/bench", "--out", str(tmp_path / "out")]
    assert main(base) == 2
    assert "--option allow-unofficial=true" in capsys.readouterr().err
    assert main([*base, "--model-repo", "org/owl", "--option", "allow-unofficial=true"]) == 2
    assert "--option model-repo-mismatch-ok=true" in capsys.readouterr().err
    assert main([*base, "--model-repo", "org/owl", "--option", "allow-unofficial=true", "--option", "model-repo-mismatch-ok=true"]) == 0
    (entry, *_) = check_eval_file(tmp_path / "out" / ".eval_results" / "rf100vl.yaml")
    assert entry.notes == SMOKE_NOTE


# ---------------------------------------------------------------- pushing and reading back


def test_a_push_fills_the_revision_and_attribution_and_leaves_out_undeclared_tasks(hub_server, bench_repo, tmp_path):
    rows = rows_of() + [real_uouo("uouo-mmd", 0.5, 0.75)]
    files = eval_files(rows, bench_repo, source_url=f"{hub_server.url}/datasets/org/results")
    with pytest.warns(UnregisteredFrameworkWarning, match="'rf100vl-hf' is not one of the Hub's evaluation"):
        pushed = publish_eval_results(files, "org/owl", bench_repo, token=hub_server.token)
    sha = hub_server.repos[("dataset", bench_repo)].branches["main"]
    assert pushed.benchmark_revision == sha and pushed.pull_request is None and pushed.changed
    assert pushed.left_out == {"mmd": "not a task of org/bench's eval.yaml",
                               "mmd-quadrant": "not a task of org/bench's eval.yaml"}  # a detection benchmark
    (entries,) = files_at(hub_server, "org/owl").values()
    assert [e["dataset"] for e in entries] == [{"id": bench_repo, "task_id": n, "revision": sha} for n in DATASETS]
    assert entries[0]["source"] == {"url": f"{hub_server.url}/datasets/org/results", "name": "rf100vl-hf results",
                                    "org": "org"}  # the token's user is a member of org
    mine = eval_files(rows[:3], bench_repo, source_url=f"{hub_server.url}/datasets/tester/results")
    publish_eval_results(mine, "org/owl", bench_repo, token=hub_server.token)
    assert files_at(hub_server, "org/owl")[".eval_results/rf100vl.yaml"][0]["source"]["user"] == "tester"


def test_a_second_push_updates_its_pull_request_and_hub_status_lists_it(hub_server, bench_repo, registered, capsys):
    repo = "org/owl-pr"
    HfApi(token=hub_server.token).create_repo(repo)
    rows = rows_of(checkpoint=repo)
    first = publish_eval_results(eval_files(rows, bench_repo), repo, bench_repo, token=hub_server.token, create_pr=True)
    assert (first.pull_request, first.updated, first.changed) == (1, False, True)
    assert first.url == f"{hub_server.url}/{repo}/discussions/1"
    better = rows_of(checkpoint=repo, aps=(31.0, 41.0, 51.0))
    second = publish_eval_results(eval_files(better, bench_repo), repo, bench_repo, token=hub_server.token, create_pr=True)
    assert (second.pull_request, second.updated, second.changed) == (1, True, True)
    assert len(hub_server.repos[("model", repo)].discussions) == 1  # no second pull request with the same scores
    assert [e["value"] for e in files_at(hub_server, repo, "refs/pr/1")[".eval_results/rf100vl.yaml"]] == [31.0, 41.0, 51.0]
    assert files_at(hub_server, repo) == {}  # main is untouched until the pull request is merged
    again = publish_eval_results(eval_files(better, bench_repo), repo, bench_repo, token=hub_server.token, create_pr=True)
    assert (again.pull_request, again.changed) == (1, False)

    status = hub_status(repo, token=hub_server.token)
    assert [(e.task_id, e.value, e.pull_request) for e in status.entries] == [
        ("actions", 31.0, 1), ("bees", 41.0, 1), ("fish-market-ggjso", 51.0, 1)]
    (pr,) = status.pull_requests
    assert pr.pull_request.num == 1 and pr.tasks == {".eval_results/rf100vl.yaml": [f"{bench_repo}:{n}" for n in DATASETS]}
    (board,) = status.leaderboards
    assert board.dataset == bench_repo and board.problem is None
    assert {(r.task_id, r.model_id, r.value, r.pull_request) for r in board.rows} >= {("bees", repo, 41.0, 1)}

    assert main(["results", "hub-status", "--model-repo", repo, "--option", f"token={hub_server.token}"]) == 0
    out = capsys.readouterr().out
    assert f"  #1 'Add evaluation results (rf100vl-hf)' by tester ({hub_server.url}/{repo}/discussions/1):" in out
    assert f"    {bench_repo} bees: 41.0  (.eval_results/rf100vl.yaml, pull request #1)" in out
    assert f"leaderboard of {bench_repo} (evaluation_framework rf100vl-hf, not in the Hub's list" in out

    HfApi(token=hub_server.token).merge_pull_request(repo, 1)
    merged = hub_status(repo, token=hub_server.token)
    assert merged.pull_requests == [] and {e.pull_request for e in merged.entries} == {None}
    newer = rows_of(checkpoint=repo, aps=(32.0, 42.0, 52.0))
    third = publish_eval_results(eval_files(newer, bench_repo), repo, bench_repo, token=hub_server.token, create_pr=True)
    assert (third.pull_request, third.updated) == (2, False)  # the merged one is not reopened


def test_a_pull_request_of_someone_else_is_left_alone(hub_server, bench_repo, monkeypatch):
    repo = "org/owl-other"
    HfApi(token=hub_server.token).create_repo(repo)
    monkeypatch.setitem(hub_server.tokens, "hf_other_user", "someone")
    files = eval_files(rows_of(checkpoint=repo), bench_repo)
    theirs = publish_eval_results(files, repo, bench_repo, token="hf_other_user", create_pr=True)
    mine = publish_eval_results(files, repo, bench_repo, token=hub_server.token, create_pr=True)
    assert (theirs.pull_request, mine.pull_request, mine.updated) == (1, 2, False)
    assert [pr.pull_request.author for pr in hub_status(repo, token=hub_server.token).pull_requests] == ["tester",
                                                                                                          "someone"]


def test_an_unregistered_framework_has_no_leaderboard_and_hub_status_says_why(hub_server, bench_repo):
    repo = "org/owl-unlisted"
    HfApi(token=hub_server.token).create_repo(repo)
    publish_eval_results(eval_files(rows_of(checkpoint=repo), bench_repo), repo, bench_repo, token=hub_server.token)
    status = hub_status(repo, token=hub_server.token, datasets=[bench_repo])
    assert status.entries == [] and status.refused == {}  # nothing shows: the dataset is not a benchmark yet
    (board,) = status.leaderboards
    assert board.registered is False and "is not a benchmark" in board.problem
    assert "not a registered evaluation framework" in board.problem


def test_a_file_the_hub_refuses_is_listed_with_why(hub_server, bench_repo, registered):
    repo = "org/owl-refused"
    api = HfApi(token=hub_server.token)
    api.create_repo(repo)
    text = f"- dataset: {{id: {bench_repo}, task_id: bees}}\n  value: 40.0\n  date: 2025-05-01\n"  # unquoted date
    api.upload_file(path_or_fileobj=text.encode(), path_in_repo=".eval_results/hand.yaml", repo_id=repo)
    api.upload_file(path_or_fileobj=f"- dataset: {{id: {bench_repo}, task_id: nope}}\n  value: 1\n".encode(),
                    path_in_repo=".eval_results/other.yaml", repo_id=repo)
    status = hub_status(repo, token=hub_server.token)
    assert status.refused == {
        ".eval_results/hand.yaml": "[0].date: must be a quoted string (unquoted, YAML reads it as a date)",
        ".eval_results/other.yaml": f"task 'nope' is not a task of the eval.yaml of {bench_repo}"}
    assert any(line.startswith("  refused by the Hub: .eval_results/hand.yaml: [0].date") for line in status_lines(status))


def test_pushing_names_a_missing_benchmark_or_model(hub_server, bench_repo):
    files = eval_files(rows_of(), bench_repo)
    with pytest.raises(Exception, match=r"--benchmark org/missing: no such dataset"):
        publish_eval_results(files, "org/owl", "org/missing", token=hub_server.token)
    with pytest.raises(Exception, match=r"--model-repo org/no-model: no such model repository"):
        publish_eval_results(files, "org/no-model", bench_repo, token=hub_server.token, mismatch_ok=True)


def test_the_command_pushes_then_updates_its_pull_request(hub_server, bench_repo, tmp_path, capsys):
    repo = "org/owl-cli"
    HfApi(token=hub_server.token).create_repo(repo)
    folder = write_jsonl(tmp_path / "run", rows_of(checkpoint=repo))
    argv = ["results", "eval-results", str(folder), "--benchmark", bench_repo, "--model-repo", repo, "--option", "create-pr=true",
            "--option", "source=org/results", "--option", f"token={hub_server.token}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rf100vl: task all left out (2 of 100 datasets scored)" in out
    assert f"pushed to pull request #1: {hub_server.url}/{repo}/discussions/1" in out
    write_jsonl(folder, rows_of(checkpoint=repo, aps=(1.0, 2.0, 3.0)))
    assert main(argv) == 0
    assert f"updated pull request #1, which carried earlier scores: {hub_server.url}/{repo}/discussions/1" in \
        capsys.readouterr().out


def test_a_checked_file_names_what_breaks_the_specification(tmp_path):
    path = Path(tmp_path / "bad.yaml")
    path.write_text("- dataset: {id: org/bench, task_id: bees, subset: x}\n  value: '40'\n")
    with pytest.raises(Exception, match=r"bad.yaml: entries: breaks the Hub's specification: \[0\]\.dataset\.subset: "
                                        r"not a field of the specification.*\[0\]\.value: must be a number"):
        check_eval_file(path)


# ---------------------------------------------------------------- the Hub's answers read back with care


@pytest.mark.parametrize("body, content_type", [
    (b"<!doctype html><html><body>Hugging Face is down for maintenance</body></html>", "text/html"),
    (b"[1, 2, 3]", "application/json"),
    (b'{"evalResults": 5}', "application/json"),
    (b'{"evalResults": ["a", "b"]}', "application/json"),
], ids=["html", "list", "number", "strings"])
def test_hub_status_says_in_one_line_that_an_answer_is_not_a_models_results(hub_server, bench_repo, capsys,
                                                                          body, content_type):
    hub_server.answer("repo_info", body, content_type)
    try:
        assert main(["results", "hub-status", "--model-repo", "org/owl", "--option", f"token={hub_server.token}"]) == 2
    finally:
        hub_server.clear_faults()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"rf100vl-hf: error: reading what the Hub lists for org/owl: {hub_server.url}/api/models/"
                          "org/owl answered ") and err.rstrip().endswith("not a model's evaluation results")


def test_a_model_repository_holding_an_escape_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["results", "hub-status", "--model-repo", "org/o\x1b[2Jwl"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and "\x1b" not in err
    assert "--model-repo: expected a Hub repository id ORG/NAME" in err and "'org/o\\x1b[2Jwl'" in err


def test_escapes_in_the_hubs_answer_are_shown_not_obeyed(hub_server, bench_repo, registered, monkeypatch, capsys):
    entry = {"dataset": {"id": bench_repo, "task_id": "bees"}, "value": 40.0, "notes": "fine\x1b]0;pwned\x07\nline"}
    monkeypatch.setattr(hub_server, "eval_results", lambda repo: [
        {"filename": ".eval_results/a.yaml", "data": entry},
        {"filename": ".eval_results/\x1b[2Jb.yaml", "error": "bad \x1b[31mred\x9b"}])
    assert main(["results", "hub-status", "--model-repo", "org/owl", "--option", f"dataset={bench_repo}"]) == 0
    out = capsys.readouterr().out
    assert not set(out) & {"\x1b", "\x07", "\x9b"}
    assert "notes: fine\\x1b]0;pwned\\x07\\x0aline" in out
    assert "refused by the Hub: .eval_results/\\x1b[2Jb.yaml: bad \\x1b[31mred\\x9b" in out
