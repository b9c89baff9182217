"""Runs that survive and spread: a killed run resumes (finished pairs reused, a pair cut short
resumes at its first unanswered image through the answer cache), an interrupted session says
what did not finish, shards and pytest-xdist workers give the rows of one process."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf.results.rows import latest, read_results
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.session.shard import parts as grouped_parts
from pytest_rf100vl.session.shard import shard

from tests.plugin.helpers import link, results, session_rows

SCALE_ADAPTERS = Path(__file__).with_name("scale_adapters.py")
DATASETS = ("alpha", "beta", "gamma")
MODELS = ("counter:a", "counter:b")
SCORES = ("ap", "ap50", "ap75", "n_predictions", "n_images", "dataset_fingerprint", "adapter_options")


@pytest.fixture
def scale(pytester: pytest.Pytester, small_sample: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pytester folder with the counting adapters and three datasets (the small sample thrice);
    returns the log of the images the adapters were asked about."""
    pytester.makeconftest(SCALE_ADAPTERS.read_text(encoding="utf-8"))
    for name in DATASETS:
        link(data_dir, name, small_sample)
    log = pytester.path / "asked.log"
    monkeypatch.setenv("SCALE_LOG", str(log))
    monkeypatch.delenv("SCALE_KILL_AT", raising=False)
    return log


def matrix_args(data_dir: Path, results_dir: Path, *extra: str) -> list[str]:
    return [
        *(arg for model in MODELS for arg in ("--rf100vl-model", model)), "--rf100vl-dataset", ",".join(DATASETS),
        f"--rf100vl-data-option=data-dir={data_dir}", f"--rf100vl-results={results_dir}", "--rf100vl-device", "cpu",
        "-p", "no:cacheprovider", "--benchmark-disable", *extra,
    ]


def asked(log: Path, pids: bool = False) -> list[tuple[Any, ...]]:
    """(model, dataset, image id) of each image an adapter was asked about, in order (and the
    process that asked, with ``pids``)."""
    if not log.exists():
        return []
    lines = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    return [(m, d, int(i), int(pid)) if pids else (m, d, int(i)) for m, d, i, pid in lines]


def scores(rows: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {(row["spec"], row["dataset"]): tuple(row[key] for key in SCORES) for row in rows}


def test_a_killed_run_reuses_finished_pairs_and_resumes_a_pair_at_its_first_unanswered_image(
    pytester: pytest.Pytester, scale: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.runpytest(*matrix_args(data_dir, pytester.path / "reference")).assert_outcomes(passed=6)
    reference = scores(results(pytester.path / "reference"))
    scale.unlink()

    folder = pytester.path / "results"
    monkeypatch.setenv("SCALE_KILL_AT", "12")  # the 4th image of the second pair (8 images a dataset)
    killed = pytester.runpytest_subprocess(*matrix_args(data_dir, folder), timeout=300)
    assert killed.ret == -9
    before = asked(scale)
    assert Counter((m, d) for m, d, _ in before) == {("a", "alpha"): 8, ("a", "beta"): 3}
    assert [(row["spec"], row["dataset"]) for row in results(folder)] == [("counter:a", "alpha")]

    monkeypatch.delenv("SCALE_KILL_AT")
    scale.unlink()
    pytester.runpytest(*matrix_args(data_dir, folder)).assert_outcomes(passed=6)
    after = asked(scale)
    per_pair = Counter((m, d) for m, d, _ in after)
    assert ("a", "alpha") not in per_pair  # reused: not asked again
    assert per_pair[("a", "beta")] == 5  # resumed at its first unanswered image
    answered_before = {i for m, d, i in before if d == "beta"}
    assert answered_before.isdisjoint(i for m, d, i in after if (m, d) == ("a", "beta"))
    assert all(per_pair[(m, d)] == 8 for m in ("b",) for d in DATASETS) and per_pair[("a", "gamma")] == 8

    rows = session_rows(folder)
    assert scores(rows) == reference  # the final results are an uninterrupted run's
    reused = [row for row in rows if row["reused_from"]]
    assert [(row["spec"], row["dataset"]) for row in reused] == [("counter:a", "alpha")]
    assert reused[0]["reused_from"] == results(folder)[0]["run_id"]
    assert len(results(folder)) == 6  # each pair's row once: the reused one is not written again
    beta = next(row for row in rows if row["dataset"] == "beta" and row["spec"] == "counter:a")
    assert (beta["cached_images"], beta["n_images"]) == (3, 8)
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "reused from earlier runs: counter:a on alpha" in summary and "## Interrupted" not in summary


def test_rerun_recomputes_and_reused_rows_meet_this_sessions_thresholds(
    pytester: pytest.Pytester, scale: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rf100vl_hf.rf100vl import build_record

    walked: list[dict[str, Any]] = []
    real_manifest = build_record.file_manifest
    monkeypatch.setattr(build_record, "file_manifest", lambda roots: walked.append(roots) or real_manifest(roots))
    folder = pytester.path / "results"
    one = ["--rf100vl-model", "counter:a", "--rf100vl-model", "oracle", "--rf100vl-dataset", "alpha",
           f"--rf100vl-data-option=data-dir={data_dir}", f"--rf100vl-results={folder}", "--override-ini", "rf100vl_cache=off",
           "--rf100vl-device", "cpu", "-p", "no:cacheprovider", "--benchmark-disable"]
    pytester.runpytest(*one).assert_outcomes(passed=2)
    assert len(asked(scale)) == 8
    walked.clear()
    # reused (the oracle through its class, the hook's adapter by spec), then checked anew
    (pytester.path / "ninety.csv").write_text("model,target,min_ap\n*,*,90\n", encoding="utf-8")
    failed = pytester.runpytest(*one, "--override-ini=rf100vl_thresholds=ninety.csv")
    failed.assert_outcomes(passed=0, failed=2)
    failed.stdout.fnmatch_lines(["*counter:a on alpha: AP50:95 * is below the minimum 90*"])
    assert len(asked(scale)) == 8
    assert len(walked) == 1  # the export of the two reused pairs is checked by stat once a session, not once a pair
    second = session_rows(folder)
    assert all(row["reused_from"] for row in second) and [row["check"] for row in second] == ["failed", "failed"]
    assert len(results(folder)) == 2  # a rerun that reuses every pair adds no row
    pytester.runpytest(*one, "--rf100vl-rerun").assert_outcomes(passed=2)
    assert len(asked(scale)) == 16 and not any(row["reused_from"] for row in session_rows(folder))
    # another option is another identity: it runs
    pytester.runpytest(*one, "--rf100vl-adapter-option", "counter.note=2").assert_outcomes(passed=2)
    assert len(asked(scale)) == 24
    assert [bool(row["reused_from"]) for row in session_rows(folder)] == [False, True]
    assert len(results(folder)) == 5 and not any(row.get("reused_from") for row in results(folder))


def test_a_replayed_file_is_reused_while_its_bytes_are_the_same(
    pytester: pytest.Pytester, small_sample: Path, data_dir: Path
) -> None:
    link(data_dir, "alpha", small_sample)
    common = ["--rf100vl-dataset", "alpha", f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-device", "cpu",
              "-p", "no:cacheprovider", "--benchmark-disable"]
    pytester.runpytest("--rf100vl-model", "oracle", f"--rf100vl-results={pytester.path / 'oracle'}",
                       *common).assert_outcomes(passed=1)
    submitted = pytester.path / "oracle" / "predictions" / "oracle" / "alpha" / "test.json"
    replay = ["--rf100vl-model", f"predictions:{submitted.parent.parent}", f"--rf100vl-results={pytester.path / 'r'}",
              *common]
    for _ in range(2):
        pytester.runpytest(*replay).assert_outcomes(passed=1)
    (first,), (again,) = results(pytester.path / "r"), session_rows(pytester.path / "r")
    assert again["reused_from"] == first["run_id"] and again["model_revision"] == first["model_revision"]
    records = json.loads(submitted.read_text())
    submitted.write_text(json.dumps(records[1:]))  # a box fewer: another file, its pair runs again
    pytester.runpytest(*replay).assert_outcomes(passed=1)
    changed = results(pytester.path / "r")[-1]
    assert not changed["reused_from"] and changed["model_revision"] != first["model_revision"]
    assert changed["ap"] < first["ap"]


def test_an_interrupted_session_says_which_pairs_did_not_finish(
    fakes: pytest.Pytester, small_sample: Path, data_dir: Path
) -> None:
    for name in ("alpha", "beta"):
        link(data_dir, name, small_sample)
    folder = fakes.path / "results"
    result = fakes.runpytest_inprocess(
        "--rf100vl-model", "interrupt", "--rf100vl-model", "nothing", "--rf100vl-dataset", "alpha,beta",
        f"--rf100vl-data-option=data-dir={data_dir}", f"--rf100vl-results={folder}", "--rf100vl-device", "cpu",
        "-p", "no:cacheprovider", no_reraise_ctrlc=True,
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "## Interrupted" in summary and "This run was interrupted before 3 pair(s) finished" in summary
    assert "- interrupt-beta\n- nothing-alpha\n- nothing-beta" in summary
    assert [row["dataset"] for row in results(folder)] == ["alpha"]


def test_two_shards_merged_equal_the_unsharded_run(pytester: pytest.Pytester, scale: Path, data_dir: Path) -> None:
    pytester.runpytest(*matrix_args(data_dir, pytester.path / "whole")).assert_outcomes(passed=6)
    parts = []
    for part in ("1/2", "2/2"):
        folder = pytester.path / f"shard-{part[0]}"
        result = pytester.runpytest(*matrix_args(data_dir, folder, "--rf100vl-shard", part))
        result.assert_outcomes(passed=3)
        parts.append(folder)
    assert {row["dataset"] for row in results(parts[0])}.isdisjoint(
        {row["dataset"] for row in results(parts[1]) if row["spec"] == results(parts[0])[0]["spec"]}
    ) or len(results(parts[0])) == 3
    merged = latest(read_results(parts))
    assert len(merged) == 6 and scores(merged) == scores(results(pytester.path / "whole"))


def test_shards_are_balanced_deterministic_and_cover_the_matrix() -> None:
    sizes = {"a": 100.0, "b": 60.0, "c": 50.0, "d": 40.0, "e": 10.0}
    pairs = [Pair(ModelSpec.parse(model), dataset, "rf100vl") for model in ("m1", "m2") for dataset in sizes]
    parts = [shard(pairs, part, 3, lambda pair: sizes[pair.dataset]) for part in (1, 2, 3)]
    assert Counter(pair for part in parts for pair in part) == Counter(pairs)  # each pair once
    loads = [sum(sizes[pair.dataset] for pair in part) for part in parts]
    assert max(loads) - min(loads) <= 40  # LPT: within the smallest large item
    assert parts == [shard(pairs, part, 3, lambda pair: sizes[pair.dataset]) for part in (1, 2, 3)]
    assert all(part == [pair for pair in pairs if pair in part] for part in parts)  # matrix order kept
    assert shard(pairs, 1, 1, lambda pair: 1.0) == pairs
    by_dataset = grouped_parts(pairs, 3, lambda pair: sizes[pair.dataset], together=lambda pair: pair.dataset)
    assert [sorted({pair.dataset for pair in part}) for part in by_dataset] == [["a"], ["b", "e"], ["c", "d"]]
    assert all(part == [pair for pair in pairs if pair in part] for part in by_dataset)


def test_a_bad_shard_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", "--rf100vl-shard", "3/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rf100vl-shard: expected I/N with 1 <= I <= N*"])


TOLD = """

def pytest_rf100vl_row_written(config, pair, row):
    import os

    with open(os.environ["TOLD_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {hasattr(config, 'workerinput')} {pair.spec} {row['dataset']} {row['run_id']}\\n")


def heavy_imported(moment):
    import os
    import sys

    if os.environ.get("IMPORTED_LOG"):
        heavy = {"datasets", "torch", "transformers", "huggingface_hub"} & {name.split(".")[0] for name in sys.modules}
        with open(os.environ["IMPORTED_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{moment} {','.join(sorted(heavy))}\\n")


def pytest_xdist_setupnodes(config, specs):
    heavy_imported("spawn")


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        heavy_imported("end")
"""


def test_xdist_workers_give_the_rows_of_one_process_and_one_summary(
    pytester: pytest.Pytester, scale: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = pytester.path / "told.log"
    monkeypatch.setenv("TOLD_LOG", str(told))
    (pytester.path / "conftest.py").write_text(SCALE_ADAPTERS.read_text(encoding="utf-8") + TOLD, encoding="utf-8")
    pytester.runpytest(*matrix_args(data_dir, pytester.path / "single")).assert_outcomes(passed=6)
    scale.unlink()
    told.unlink()
    imported = pytester.path / "imported.log"
    monkeypatch.setenv("IMPORTED_LOG", str(imported))
    folder = pytester.path / "workers"
    result = pytester.runpytest_subprocess(*matrix_args(data_dir, folder, "-n", "2", "--no-header"), timeout=300)
    result.assert_outcomes(passed=6)
    # the controller runs no pair: before it starts the workers it has imported neither datasets,
    # torch nor huggingface_hub (the Hub token is found once they are started, unless a header is
    # printed before: it is scrubbed), and never datasets or torch
    assert imported.read_text(encoding="utf-8").splitlines() == ["spawn ", "end huggingface_hub"]
    assert result.stdout.str().count("rf100vl summary") == 1
    rows = results(folder)
    # pytest_rf100vl_row_written heard of each row once, in the controller, as the workers wrote them
    lines = [line.split() for line in told.read_text(encoding="utf-8").splitlines()]
    assert len({pid for pid, *_ in lines}) == 1 and {worker for _, worker, *_ in lines} == {"False"}
    assert sorted((model, dataset, run) for _, _, model, dataset, run in lines) == sorted(
        (row["spec"], row["dataset"], row["run_id"]) for row in rows)
    assert scores(rows) == scores(results(pytester.path / "single")) and len({row["run_id"] for row in rows}) == 1
    # the pairs were split by cost, a dataset's pairs in one worker (so it loaded each dataset
    # once), not by model; each worker ran its part model by model, so it loaded each model once
    log = asked(scale, pids=True)
    assert sorted((m, d) for m, d, _, _ in log) == sorted((m, d) for m in "ab" for d in DATASETS for _ in range(8))
    by_worker = {pid: [(m, d) for m, d, _, p in log if p == pid] for pid in {pid for *_, pid in log}}
    assert sorted(len(set(pairs)) for pairs in by_worker.values()) == [2, 4]  # 2 datasets and 1, both models
    assert all({m for m, _ in pairs} == {"a", "b"} for pairs in by_worker.values())
    assert all([m for m, _ in pairs] == sorted(m for m, _ in pairs) for pairs in by_worker.values())
    assert all([m for m, _ in pairs] == sorted(m for m, _ in pairs) for pairs in by_worker.values())
    parquet = pytest.importorskip("pyarrow.parquet").read_table(folder / "results.parquet").to_pylist()
    assert [(row["spec"], row["dataset"]) for row in parquet] == [(m, d) for m in MODELS for d in DATASETS]
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "## Interrupted" not in summary  # every pair finished, though the controller ran none itself
    assert comparable(summary) == comparable((pytester.path / "single" / "summary.md").read_text(encoding="utf-8"))
    (command,) = {row["command"] for row in rows}  # the command as typed, in every worker's rows
    assert command.startswith("pytest ") and "--rf100vl-model counter:a --rf100vl-model counter:b" in command
    assert command.endswith(" -n 2 --no-header")
    assert f"- command: `{command}`" in summary


def comparable(summary: str) -> list[str]:
    """A summary without what differs between two runs of the same matrix: run ids, dates,
    commands, timings (the images/s column of the runs table)."""
    kept = []
    for line in summary.splitlines():
        if line.startswith(("- runs:", "- date:", "- command:")):
            continue
        cells = line.split("|")
        if line.startswith("| counter:") and len(cells) > 3:
            cells[3] = " ~ "
        kept.append("|".join(cells))
    return kept


def test_benchmark_json_carries_the_warmup_and_the_steady_state_rate(
    pytester: pytest.Pytester, scale: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALE_SLEEP", "0.02")
    pytester.runpytest(
        "--rf100vl-model", "counter:a", "--rf100vl-dataset", "alpha", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", "--override-ini", "rf100vl_warmup_batches=3", "--benchmark-json", "benchmark.json", "-p", "no:cacheprovider",
    ).assert_outcomes(passed=1)
    (benchmark,) = json.loads((pytester.path / "benchmark.json").read_text(encoding="utf-8"))["benchmarks"]
    info = benchmark["extra_info"]
    assert info["warmup_batches"] == 3 and info["warmup_s"] >= 0.06 and info["cached_images"] == 0
    assert 0 < info["images_per_s"] < 1 / 0.02 and info["latency_batch_p95_ms"] >= info["latency_batch_p50_ms"] >= 20


def test_a_device_map_reaches_the_model_and_its_row(pytester: pytest.Pytester, small_sample: Path,
                                                    data_dir: Path) -> None:
    link(data_dir, "sample", small_sample)
    result = pytester.runpytest_subprocess(
        "--rf100vl-model", "owlv2:tiny", f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-dataset", "sample",
        "--override-ini", "rf100vl_device_map=auto", "--override-ini", "rf100vl_cache=off", timeout=300,
    )
    result.assert_outcomes(passed=1)
    (row,) = results(pytester.path / ".rf100vl" / "results")
    assert (row["device_map"], row["device"]) == ("auto", "cpu")
    bad = pytester.runpytest_subprocess("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample",
                                        "--override-ini", "rf100vl_device_map=all")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


def test_a_rerun_answered_from_the_cache_keeps_the_measured_throughput(
    pytester: pytest.Pytester, scale: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALE_SLEEP", "0.01")
    folder = pytester.path / "results"
    one = ["--rf100vl-model", "counter:a", "--rf100vl-dataset", "alpha", f"--rf100vl-data-option=data-dir={data_dir}",
           f"--rf100vl-results={folder}", "--rf100vl-device", "cpu", "-p", "no:cacheprovider",
           "--benchmark-disable"]
    pytester.runpytest(*one).assert_outcomes(passed=1)
    (measured,) = session_rows(folder)
    assert measured["images_per_s"] > 0 and measured["answers_from_cache"] is False
    pytester.runpytest(*one, "--rf100vl-rerun").assert_outcomes(passed=1)
    assert len(asked(scale)) == 8  # every answer came from the cache
    (cached,) = session_rows(folder)
    assert cached["answers_from_cache"] is True and cached["cached_images"] == 8
    assert cached["images_per_s"] == measured["images_per_s"] and cached["throughput_from"] == measured["run_id"]
    from rf100vl_hf.results.rows import latest, read_results

    (merged,) = latest(read_results([folder]))
    assert merged["run_id"] == cached["run_id"] and merged["images_per_s"] == measured["images_per_s"]


def test_merging_never_replaces_a_measured_throughput_with_a_missing_one() -> None:
    from rf100vl_hf.results.rows import latest

    older = {"model": "m", "dataset": "d", "run_id": "r1", "timestamp": "2026-01-01T00:00:00+00:00",
             "images_per_s": 12.5, "images_per_s_min": 11.0, "images_per_s_max": 14.0, "throughput_rounds": 3}
    newer = {**older, "run_id": "r2", "timestamp": "2026-01-02T00:00:00+00:00", "images_per_s": float("nan"),
             "images_per_s_min": None, "images_per_s_max": None, "throughput_rounds": 0, "ap": 50.0}
    (merged,) = latest([older, newer])
    assert (merged["run_id"], merged["ap"], merged["images_per_s"], merged["throughput_from"]) == ("r2", 50.0, 12.5, "r1")
    assert latest([{**newer, "images_per_s": 3.0}, older])[0]["images_per_s"] == 3.0  # a measured one stays
