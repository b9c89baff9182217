"""``--rf100vl-wandb`` and ``--rf100vl-mlflow``: one run per session in each tracker's offline
store (W&B's offline run folder, an MLflow ``file:`` store), read back with the library's own API
or files; each row logged as it finishes, then the summary's tables, the figures and the
results files; nothing secret in any of it; a failing tracker costs no result; a missing
library is a usage error naming the pip install."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf.results.tables import ap_table

from tests.plugin.helpers import results

try:  # imported before any in-process run, which drops the modules it saw imported
    import wandb
    from mlflow import MlflowClient
except ImportError:  # the missing-library test runs without them
    wandb = MlflowClient = None

PASSWORD = "tr4cker-PW-0aa1"
RUN = ("--rf100vl-model", "oracle", "--rf100vl-model", "nothing", "--rf100vl-dataset", "sample",
       "--rf100vl-device", "cpu", "--benchmark-disable", "-p", "no:cacheprovider")
SEEN = """
import glob, os

def pytest_rf100vl_result_row(config, pair, row):
    # what the trackers had logged when this row was made (the rows before it, if they log as rows finish)
    return {"tracked_before": {
        "wandb": len(glob.glob(os.environ["WANDB_DIR"] + "/wandb/offline-run-*/files/media/table/rows_*.table.json")),
        "mlflow": len(glob.glob(os.environ["TRACKING_ROOT"] + "/*/*/artifacts/rows/*.json")),
    }}
"""


@pytest.fixture
def offline(fakes: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """W&B offline in a folder of the test; an MLflow file store beside it. W&B reads its
    settings once per process: it is torn down around each test, as a new process would be."""
    if wandb is None or MlflowClient is None:
        pytest.skip('the tracker extras are not installed (pip install "rf100vl-hf[wandb,mlflow]")')
    wandb_dir, tracking = fakes.path / "wandb-dir", fakes.path / "mlruns"
    wandb_dir.mkdir()
    for name, value in {"WANDB_MODE": "offline", "WANDB_DIR": str(wandb_dir), "WANDB_SILENT": "true",
                        "MLFLOW_ALLOW_FILE_STORE": "true", "TRACKING_ROOT": str(tracking)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    (fakes.path / "conftest.py").write_text((fakes.path / "conftest.py").read_text() + SEEN, encoding="utf-8")
    wandb.teardown()
    yield {"wandb": wandb_dir, "mlflow": tracking}
    wandb.teardown()


def everything(*roots: Path) -> bytes:
    return b"".join(path.read_bytes() for root in roots for path in sorted(root.rglob("*")) if path.is_file())


def wandb_run(folder: Path) -> Path:
    (run,) = (folder / "wandb").glob("offline-run-*")
    return run / "files"


def table(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_both_trackers_log_each_row_as_it_finishes_then_the_summary(fakes: pytest.Pytester,
                                                                     offline: dict[str, Path]) -> None:
    import faster_coco_eval  # noqa: F401  (loaded once: in-process runs drop what they import)

    uri = offline["mlflow"].as_uri()
    result = fakes.runpytest_inprocess(*RUN, "--override-ini", "rf100vl_wandb=rf100vl-tests", f"--override-ini=rf100vl_mlflow={uri}")
    result.assert_outcomes(passed=2)
    rows = results(fakes.path / ".rf100vl" / "results")
    assert [row["spec"] for row in rows] == ["oracle", "nothing"] and rows[0]["ap"] > rows[1]["ap"] == 0
    assert [row["tracked_before"] for row in rows] == [{"wandb": 0, "mlflow": 0}, {"wandb": 1, "mlflow": 1}]
    assert "rf100vl: warning" not in result.stdout.str()
    expected = ap_table(rows)
    summary = (fakes.path / ".rf100vl" / "results" / "summary.md").read_text(encoding="utf-8")
    plots = {"domain_means", "heatmap", "errors_by_type", "per_class_sample"}

    # W&B: one offline run; each increment of the rows table holds the row that had just finished
    files = wandb_run(offline["wandb"])
    increments = sorted((files / "media" / "table").glob("rows_*.table.json"), key=lambda p: p.stat().st_mtime_ns)
    logged = [line for path in increments for line in table(path)["data"]]
    assert [json.loads(line[-1]) for line in logged] == rows
    assert [line[:4] for line in logged] == [[rows[0]["run_id"], "rf100vl", "oracle", "sample"],
                                             [rows[0]["run_id"], "rf100vl", "nothing", "sample"]]
    (ap,) = (files / "media" / "table" / "tables").glob("*.table.json")
    assert (table(ap)["columns"], table(ap)["data"]) == (expected.header, expected.rows)
    assert {path.name.rsplit("_", 2)[0] for path in (files / "media" / "images" / "plots").glob("*.png")} == plots
    assert (files / "summary.md").read_text(encoding="utf-8") == summary and (files / "results.parquet").is_file()

    # MLflow: one run named by the session's run id, read back through its client
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("rf100vl").experiment_id])
    assert run.info.run_name == rows[0]["run_id"] and run.info.status == "FINISHED"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "ap")] == [
        (0, rows[0]["ap"]), (1, 0.0)]
    artifacts = Path(client.download_artifacts(run.info.run_id, "", str(fakes.path / "downloaded")))
    assert [json.loads((artifacts / "rows" / f"{step:04d}.json").read_text()) for step in (0, 1)] == rows
    ap = json.loads((artifacts / "tables" / "ap50_95.json").read_text())
    assert (ap["columns"], ap["data"]) == (expected.header, expected.rows)
    assert (artifacts / "summary.md").read_text(encoding="utf-8") == summary
    assert {path.stem for path in (artifacts / "plots").iterdir()} == plots
    session = json.loads((artifacts / "session.json").read_text())
    assert session["run_id"] == rows[0]["run_id"] and session["command"] == rows[0]["command"]
    assert session["options"]["rf100vl_wandb"] == "rf100vl-tests" and session["options"]["rf100vl_mlflow"] == uri


def test_a_failing_tracker_is_a_warning_and_costs_no_result(fakes: pytest.Pytester, offline: dict[str, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An MLflow server that cannot be reached, at a URL with a password, which MLflow's error
    repeats: the pairs pass, the W&B run is complete, the summary's last line says what failed.
    W&B records the process's command line (``sys.argv``, here the run's): never the password."""
    import faster_coco_eval  # noqa: F401

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    args = (*RUN, "--override-ini", "rf100vl_wandb=rf100vl-tests", f"--override-ini=rf100vl_mlflow=http://robot:{PASSWORD}@127.0.0.1:9")
    monkeypatch.setattr(sys, "argv", ["pytest", *args])
    result = fakes.runpytest_inprocess(*args)
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    rows = results(fakes.path / ".rf100vl" / "results")
    assert len(rows) == 2 and (fakes.path / ".rf100vl" / "results" / "summary.md").is_file()
    result.stdout.fnmatch_lines(["rf100vl: warning: rf100vl-trackers: RuntimeError: mlflow (rf100vl_mlflow): "
                                 "starting its run failed: MlflowException: *"])
    files = wandb_run(offline["wandb"])
    assert len(list((files / "media" / "table").glob("rows_*.table.json"))) == 2
    assert PASSWORD not in result.stdout.str() + result.stderr.str()
    assert PASSWORD.encode() not in everything(offline["wandb"], fakes.path / ".rf100vl")


@pytest.mark.parametrize(("option", "module", "extra"), [("--override-ini=rf100vl_wandb=project", "wandb", "wandb"),
                                                         ("--override-ini=rf100vl_mlflow=file:./mlruns", "mlflow", "mlflow")])
def test_a_missing_tracker_library_is_a_usage_error_naming_the_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, option: str, module: str, extra: str
) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else found(name, *a))
    result = pytester.runpytest_inprocess("--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", option, "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"rf100vl_{module} needs the {module} package: pip install \"rf100vl-hf[{extra}]\"" in (
        result.stderr.str())

