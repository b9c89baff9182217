"""Results from real plugin runs, published: rows carry everything a paper table needs,
``rf100vl-hf results push`` pushes a session's rows to the (stand-in) Hub, and two machines'
folders pushed at once give one repository with the union."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rf100vl_hf.hub.results_repo import push_results
from rf100vl_hf.results import ap_table, read_results, render, select

from tests.plugin.helpers import link, results

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")


@pytest.fixture
def two_datasets(data_dir: Path, small_sample: Path, shared_data: Path) -> list[str]:
    link(data_dir, "sample", small_sample)
    link(data_dir, "microcontroller", shared_data / "microcontroller")
    return [f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-dataset", "sample,microcontroller",
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
    common = [f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu"]
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

    from rf100vl_hf.cli import main

    monkeypatch.setenv("HF_TOKEN", hub_server.token)
    first, second = tmp_path / "machine-a", tmp_path / "machine-b"
    fakes.runpytest_inprocess("--rf100vl-model", "oracle", *two_datasets,
                              f"--rf100vl-results={first}").assert_outcomes(passed=2)
    assert main(["results", "push", str(first), "--repo-id", "tester/leaderboard"]) == 0
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


MACHINE = """
import subprocess, sys
from rf100vl_hf.cli import main
*args, results, repo = sys.argv[1:]
subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--benchmark-disable", *args, results],
               check=True)
sys.exit(main(["results", "push", results.partition("=")[2], "--repo-id", repo]))
"""
"""One machine of docs/scale.md's recipe: its shard's session, then ``rf100vl-hf results push``."""


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
    machines = [  # each runs its shard, then pushes it
        subprocess.Popen([sys.executable, "-c", MACHINE, *models, f"--rf100vl-shard={part}/2",
                          f"--rf100vl-results={tmp_path / f'shard-{part}'}", "tester/scale"],
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
    assert main(["results", "summary", *map(str, shards), "--out", str(tmp_path / "merged"), "--option", "no-plots=true"]) == 0
    table = render(ap_table(select(read_results([tmp_path / "one"]))), "md")
    assert render(ap_table(select(read_results(shards))), "md") == table
    assert table in (tmp_path / "merged" / "summary.md").read_text(encoding="utf-8")
    assert table in hub_server.files("tester/scale")["README.md"].decode()


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
