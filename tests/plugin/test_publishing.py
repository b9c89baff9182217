"""Results from real plugin runs, published: rows carry everything a paper table needs,
``--rf100vl-push-results`` pushes a session's rows to the (stand-in) Hub, two machines' folders
pushed at once give one repository with the union, and a failed push is a warning with the
retry command that leaves every local file as it was and the exit status unchanged."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rf100vl_hf.hub.results_repo import push_results
from rf100vl_hf.results import ap_table, read_results, render, select

from tests.plugin.helpers import link, results
from tests.support.hub_server import _Handler, echo_token

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def two_datasets(data_dir: Path, small_sample: Path, shared_data: Path) -> list[str]:
    link(data_dir, "sample", small_sample)
    link(data_dir, "microcontroller", shared_data / "microcontroller")
    return [f"--rf100vl-data-dir={data_dir}", "--rf100vl-dataset", "sample,microcontroller",
            "--rf100vl-device", "cpu"]


def test_rows_are_complete(fakes: pytest.Pytester, two_datasets: list[str]) -> None:
    fakes.runpytest_inprocess("--rf100vl-model", "oracle", *two_datasets).assert_outcomes(passed=2)
    rows = {row["dataset"]: row for row in results(fakes.path / ".rf100vl" / "results")}
    micro = rows["microcontroller"]
    assert micro["ap"] == micro["ap50"] == micro["ap75"] == 100.0
    assert micro["n_instances"] == sum(c["n_instances"] for c in micro["per_class"]) > 0
    assert {c["class"] for c in micro["per_class"]} and all(c["ap"] == 100.0 for c in micro["per_class"]
                                                             if c["n_instances"])
    assert (micro["scoring_version"], micro["split"], micro["prompt"], micro["split_parameters"]) == (2, "test",
                                                                                                     "names", "{}")
    assert micro["answer_counts"] == {} and micro["smoke"] is False and micro["command"].split()[0] == "pytest"


def test_a_replayed_smoke_run_is_a_smoke_run(fakes: pytest.Pytester, data_dir: Path, small_sample: Path) -> None:
    link(data_dir, "sample", small_sample)
    common = [f"--rf100vl-data-dir={data_dir}", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu"]
    fakes.runpytest_inprocess("--rf100vl-model", "owlv2:tiny", *common).assert_outcomes(passed=1)
    folder = fakes.path / ".rf100vl" / "results"
    replay = f"predictions:{folder / 'predictions' / 'owlv2_tiny'}"
    fakes.runpytest_inprocess("--rf100vl-model", replay, *common).assert_outcomes(passed=1)
    first, second = results(folder)
    assert first["smoke"] and second["smoke"] and second["model"] == "predictions"
    assert second["ap"] == pytest.approx(first["ap"], abs=1e-9)
    assert second["answer_counts"] == {"ignored_records": 0}


def test_two_machines_runs_pushed_at_once_give_one_repository(
    fakes: pytest.Pytester, two_datasets: list[str], hub_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datasets import load_dataset

    monkeypatch.setenv("HF_TOKEN", hub_server.token)
    first, second = tmp_path / "machine-a", tmp_path / "machine-b"
    fakes.runpytest_inprocess("--rf100vl-model", "oracle", *two_datasets, f"--rf100vl-results={first}",
                              "--rf100vl-push-results", "tester/leaderboard").assert_outcomes(passed=2)
    fakes.runpytest_inprocess("--rf100vl-model", "nothing", *two_datasets, "--rf100vl-results",
                              str(second)).assert_outcomes(passed=2)
    assert len(load_dataset("tester/leaderboard", "rf100vl", split="train")) == 2
    errors = []

    def push(folder: Path) -> None:
        try:
            push_results([folder], "tester/leaderboard", token=hub_server.token)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=push, args=(folder,)) for folder in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    rows = load_dataset("tester/leaderboard", "rf100vl", split="train", download_mode="force_redownload").to_list()
    assert sorted((row["spec"], row["dataset"]) for row in rows) == [
        ("nothing", "microcontroller"), ("nothing", "sample"), ("oracle", "microcontroller"), ("oracle", "sample")
    ]
    files = hub_server.files("tester/leaderboard")
    assert render(ap_table(select(read_results([first, second]))), "md") in files["README.md"].decode()
    assert {"plots/domain_means.png", "plots/heatmap.png"} <= set(files)


def test_n_machines_shards_pushed_to_one_repository_give_the_summary_of_one_run(
    fakes: pytest.Pytester, two_datasets: list[str], hub_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/scale.md's recipe for N machines, with two processes as two machines: each runs its
    shard and pushes to one results repository at the same time; the repository holds every
    row, and the shards' folders merge into the summary of one unsharded run."""
    from datasets import load_dataset

    from rf100vl_hf.cli import main

    monkeypatch.setenv("HF_TOKEN", hub_server.token)
    models = ["--rf100vl-model", "oracle", *two_datasets]
    fakes.runpytest_inprocess(*models, f"--rf100vl-results={tmp_path / 'one'}").assert_outcomes(passed=2)
    machines = [
        subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-disable", *models,
                          f"--rf100vl-shard={part}/2", f"--rf100vl-results={tmp_path / f'shard-{part}'}",
                          "--rf100vl-push-results", "tester/scale"],
                         cwd=fakes.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for part in (1, 2)
    ]
    outputs = [machine.communicate(timeout=300)[0] for machine in machines]
    assert [machine.returncode for machine in machines] == [0, 0], outputs
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    assert [len(results(folder)) for folder in shards] == [1, 1]
    pushed = load_dataset("tester/scale", "rf100vl", split="train", download_mode="force_redownload").to_list()
    assert sorted((row["spec"], row["dataset"]) for row in pushed) == sorted(
        (row["spec"], row["dataset"]) for row in results(tmp_path / "one"))
    assert main(["results", "summary", *map(str, shards), "--out", str(tmp_path / "merged"), "--no-plots"]) == 0
    table = render(ap_table(select(read_results([tmp_path / "one"]))), "md")
    assert render(ap_table(select(read_results(shards))), "md") == table
    assert table in (tmp_path / "merged" / "summary.md").read_text(encoding="utf-8")
    assert table in hub_server.files("tester/scale")["README.md"].decode()


def test_a_failed_push_is_a_warning_with_the_retry_command(
    fakes: pytest.Pytester, data_dir: Path, small_sample: Path, hub_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    link(data_dir, "sample", small_sample)
    monkeypatch.setenv("RF100VL_HUB_TIMEOUT", "5")
    monkeypatch.setenv("HF_TOKEN", hub_server.token)
    folder = fakes.path / "results"
    with monkeypatch.context() as refusing:  # the Hub refuses the commit, repeating the token in three forms
        refusing.setattr(_Handler, "do_commit", echo_token)
        result = fakes.runpytest_inprocess(
            "--rf100vl-model", "oracle", f"--rf100vl-data-dir={data_dir}", "--rf100vl-dataset", "sample",
            f"--rf100vl-results={folder}", "--rf100vl-push-results", "tester/unreachable",
        )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        f"rf100vl: warning: pushing results to tester/unreachable failed: *refused for token *** (as *** and ***)*; "
        f"retry with: rf100vl-hf results push {folder} --repo-id tester/unreachable --run *"
    ])
    assert "standin" not in result.stdout.str() + result.stderr.str()
    before = snapshot(folder)
    run_id = results(folder)[0]["run_id"]
    push_results([folder], "tester/unreachable", token=hub_server.token, run=run_id)  # the retry works
    assert snapshot(folder) == before
    assert hub_server.token not in "".join(path.read_text(errors="ignore") for path in folder.rglob("*")
                                           if path.is_file())


def test_results_summary_over_two_sessions_equals_one_session_that_ran_both(
    fakes: pytest.Pytester, two_datasets: list[str], tmp_path: Path
) -> None:
    from rf100vl_hf.cli import main

    def tables(folder: Path) -> str:
        text = (folder / "summary.md").read_text(encoding="utf-8")
        return text[text.index("## AP50:95"):text.index("## Runs")]

    split = [tmp_path / "session-1", tmp_path / "session-2"]
    for model, folder in zip(("oracle", "nothing"), split):
        fakes.runpytest_inprocess("--rf100vl-model", model, *two_datasets, "--rf100vl-results",
                                  str(folder)).assert_outcomes(passed=2)
    both = tmp_path / "one-session"
    fakes.runpytest_inprocess("--rf100vl-model", "oracle", "--rf100vl-model", "nothing", *two_datasets,
                              f"--rf100vl-results={both}").assert_outcomes(passed=4)
    merged = tmp_path / "merged"
    assert main(["results", "summary", *map(str, split), "--out", str(merged)]) == 0
    assert tables(merged) == tables(both)
    assert "| **All** | mean | 90.3 | 0.0 |" in tables(both)


def test_a_failed_push_shows_the_hubs_escapes_as_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pytest_rf100vl.session import publish
    from rf100vl_hf.network import HubError

    def refused(*args, **kwargs):
        raise HubError("pushing results to org/x: http://hub answered 400: bad \x1b[2J\x1b]0;owned\x07 row\nmore")

    monkeypatch.setattr(publish, "push_results", refused)
    failed, line = publish.push_session(tmp_path, [{"dataset": "bees"}], "org/x", "run-1")
    assert failed and "answered 400: bad \\x1b[2J\\x1b]0;owned\\x07 row; retry with: rf100vl-hf results push" in line
