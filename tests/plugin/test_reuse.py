"""Reusing a finished pair: deciding to reuse it loads neither its dataset nor its model, and
writes no second row; whatever changed what the pair measures (the export's contents, the
scoring) runs it again, and an export whose files were only touched is checked again by
loading it (``session/resume.py``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rf100vl_hf.results.schema import ResultRow
from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.adapters import registry
from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.core.stash import SESSION_KEY
from pytest_rf100vl.kinds.rf100vl.kind import Rf100vlKind
from pytest_rf100vl.session import resume, workers

from tests.plugin.helpers import results, session_rows


def run(pytester: pytest.Pytester, data_dir: Path) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", f"--rf100vl-data-option=data-dir={data_dir}",
        "--rf100vl-device", "cpu", "--benchmark-disable", "-p", "no:cacheprovider",
    )


def test_a_reused_pair_loads_nothing_and_a_changed_export_or_scoring_runs_again(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = Path(shutil.copytree(small_sample, data_dir / "sample"))  # a copy: edited below
    folder = pytester.path / ".rf100vl" / "results"
    run(pytester, data_dir).assert_outcomes(passed=1)
    (first,) = results(folder)

    loaded: list[str] = []
    real_load = Rf100vlKind.load

    def load(kind: Rf100vlKind, dataset: str, device: str) -> Any:
        loaded.append(dataset)
        return real_load(kind, dataset, device)

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a reused pair built its model")

    monkeypatch.setattr(Rf100vlKind, "load", load)
    with monkeypatch.context() as patched:
        patched.setattr(registry, "build", no_model)
        run(pytester, data_dir).assert_outcomes(passed=1)
        assert loaded == [] and results(folder) == [first]  # no dataset opened, no row written again
        (reused,) = session_rows(folder)
        assert reused["reused_from"] == first["run_id"] != reused["run_id"] and reused["ap"] == first["ap"]

        # files touched, contents the same: the export is read again, its fingerprint is the same
        for path in export.rglob("*"):
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        run(pytester, data_dir).assert_outcomes(passed=1)
        assert loaded == ["sample"] and results(folder) == [first]

    # one box moved: another export, its pair runs again
    annotations = export / "test" / "_annotations.coco.json"
    coco = json.loads(annotations.read_text(encoding="utf-8"))
    coco["annotations"][0]["bbox"][0] += 1
    annotations.write_text(json.dumps(coco), encoding="utf-8")
    run(pytester, data_dir).assert_outcomes(passed=1)
    rows = results(folder)
    assert len(rows) == 2 and rows[1]["dataset_fingerprint"] != first["dataset_fingerprint"]
    assert rows[1].get("reused_from") is None

    # another scoring version: runs again
    monkeypatch.setattr(resume, "SCORING_VERSION", first["scoring_version"] + 1)
    run(pytester, data_dir).assert_outcomes(passed=1)
    assert len(results(folder)) == 3 and results(folder)[2].get("reused_from") is None


class RowHook:
    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    def pytest_rf100vl_row_written(self, pair: Pair, row: ResultRow) -> None:
        self.told.append((pair.id, row.run.run_id))


def test_the_xdist_controller_has_the_rows_its_workers_reused_and_tells_the_row_hook(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    config = pytester.parseconfigure()
    hook = RowHook()
    config.pluginmanager.register(hook)
    pairs = [Pair(ModelSpec.parse(name), "alpha", "rf100vl") for name in ("a", "b", "c")]
    state = SimpleNamespace(pairs=pairs, missing={}, errors={}, left_out={}, reused=[])
    config.stash[SESSION_KEY] = state  # type: ignore[arg-type]
    row = {"benchmark": "rf100vl", "model": "m", "dataset": "alpha", "run_id": "now"}
    reused = ResultRow.from_dict({**row, "spec": "b", "reused_from": "before"})
    worker = SimpleNamespace(workeroutput={})
    workers.send_to_controller(worker, SimpleNamespace(missing={}, errors={}, left_out={}, reused=[reused]))
    exits: list[str] = []
    gateway = SimpleNamespace(exit=lambda: exits.append("exit"), join=lambda timeout: exits.append("join"))
    hooks = workers.XdistHooks(config)
    hooks.pytest_testnodedown(SimpleNamespace(config=config, gateway=gateway, **vars(worker)), None)
    assert state.reused == [reused] and hook.told == [("b-alpha", "now")]
    # the finished worker was let exit at once, and the controller waits for it at its very end
    assert exits == ["exit"]
    hooks.pytest_unconfigure(config)
    assert exits == ["exit", "join"]
    # the run's rows: those its workers wrote and those they reused, in matrix order
    jsonl = tmp_path / "results.jsonl"
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in (
        {**row, "spec": "c"}, {**row, "spec": "b", "run_id": "before"}, {**row, "spec": "a"})), encoding="utf-8")
    assert [(r.model.spec, r.run.run_id) for r in workers.rows_of_run(jsonl, "now", pairs, state.reused)] == [
        ("a", "now"), ("b", "now"), ("c", "now")]
