"""The hooks of ``hookspec.py``, implemented in a conftest as a user would: extra columns reach
every results file, the results-written hook sees the finished folder, and a failing
publisher is a warning that changes nothing already written."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.plugin.helpers import results

HOOKS = '''
import json

def pytest_rf100vl_result_row(config, pair, row):
    return {"host": "node-7", "n_images_twice": 2 * row["n_images"]}

def pytest_rf100vl_results_written(config, folder, rows):
    (folder / "published.json").write_text(json.dumps(
        {"files": sorted(p.name for p in folder.iterdir()), "datasets": [row["dataset"] for row in rows]}
    ))
'''


def run_oracle(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        "--rf100vl-model", "oracle", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu", *extra
    )


def test_added_columns_reach_every_results_file_and_the_folder_hook_sees_it_finished(
    pytester: pytest.Pytester,
) -> None:
    import json

    pytester.makeconftest(HOOKS)
    run_oracle(pytester, "--benchmark-json", "bench.json").assert_outcomes(passed=1)
    folder = pytester.path / ".rf100vl" / "results"
    (row,) = results(folder)
    assert (row["host"], row["n_images_twice"]) == ("node-7", 2 * row["n_images"])
    assert pq.read_table(folder / "results.parquet").column("host").to_pylist() == ["node-7"]
    published = json.loads((folder / "published.json").read_text())
    assert {"results.jsonl", "results.parquet", "summary.md"} <= set(published["files"])
    assert published["datasets"] == ["sample"]


def test_a_hook_may_not_replace_a_score(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("def pytest_rf100vl_result_row(config, pair, row):\n    return {'ap': 100.0}\n")
    result = run_oracle(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*pytest_rf100vl_result_row may only add columns; it returned ap*"])
    assert not (pytester.path / ".rf100vl" / "results" / "results.jsonl").exists()


def test_a_failing_publisher_is_a_warning_and_the_results_stay_as_written(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "def pytest_rf100vl_results_written(config, folder, rows):\n    raise ConnectionError('hub unreachable')\n"
    )
    result = run_oracle(pytester)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["rf100vl: warning: *ConnectionError: hub unreachable"])
    assert (pytester.path / ".rf100vl" / "results" / "summary.md").is_file()


ROW_WRITTEN = '''
import json, os

def pytest_rf100vl_row_written(config, pair, row):
    written = (config.rootpath / ".rf100vl" / "results" / "results.jsonl").read_text().count("\\n")
    with open(os.environ["ROWS_TOLD"], "a") as told:
        told.write(json.dumps({"pair": pair.id, "row": row.to_dict(), "in_file": written}) + "\\n")
    raise ConnectionError("tracker unreachable")
'''


def test_the_row_hook_hears_each_row_once_it_is_written_and_a_failure_is_a_warning(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    told = pytester.path / "told.jsonl"
    monkeypatch.setenv("ROWS_TOLD", str(told))
    pytester.makeconftest(ROW_WRITTEN)
    first = run_oracle(pytester)
    again = run_oracle(pytester)  # the finished row is reused: the hook hears of it too
    for result in (first, again):
        result.assert_outcomes(passed=1)  # other warnings depend on what the outer run imported first
        hook_warnings = [line for line in result.outlines if "HookWarning: pytest_rf100vl_row_written of" in line]
        assert len(hook_warnings) == 1 and hook_warnings[0].endswith("ConnectionError: tracker unreachable")
    heard = [json.loads(line) for line in told.read_text().splitlines()]
    assert [entry["row"] for entry in heard[:1]] == results(pytester.path / ".rf100vl" / "results")
    assert [entry["in_file"] for entry in heard] == [1, 1]  # the reused row is told, not written again
    first, reused = (entry["row"] for entry in heard)
    assert reused["reused_from"] == first["run_id"] and reused["ap"] == first["ap"]
    assert {entry["pair"] for entry in heard} == {"oracle-sample"}


PAIR_COLUMNS = '''
import numpy as np
from pytest_rf100vl.adapters.base import Adapter, Detections


class Metered(Adapter):
    """Counts its calls per pair, as a served model counts its requests."""

    name = "metered"
    option_defaults = {"base_url": "", "concurrency": 1}
    transport_options = frozenset({"concurrency"})
    repeatable = False  # billed per request, as a served model: never timed again

    def start_pair(self):
        self.calls = 0

    def predict(self, batch):
        self.calls += len(batch)
        return [Detections.empty() for _ in batch]

    def pair_columns(self):
        return {"requests": self.calls}


def pytest_rf100vl_make_adapter(config, spec, device, dtype, options):
    if spec.name == "metered":
        return Metered(None, device, dtype, **options)
'''


def test_an_adapter_adds_its_pair_columns_and_urls_are_recorded_without_credentials(
    pytester: pytest.Pytester,
) -> None:
    import json

    pytester.makeconftest(PAIR_COLUMNS)
    url = "http://user:s3cret@127.0.0.1:9/v1?key=AIza-not-a-key"
    result = pytester.runpytest_inprocess(
        "--rf100vl-model", "metered", "--rf100vl-dataset", "sample", "--rf100vl-device", "cpu",
        "--rf100vl-adapter-option", f"metered.base_url={url}", "--rf100vl-adapter-option", "metered.concurrency=4",
    )
    result.assert_outcomes(passed=1)
    folder = pytester.path / ".rf100vl" / "results"
    (row,) = results(folder)
    assert row["requests"] == row["n_images"] > 0
    assert json.loads(row["adapter_options"]) == {"base_url": "http://127.0.0.1:9/v1"}  # concurrency: transport
    assert json.loads(row["requested_options"])["base_url"] == "http://127.0.0.1:9/v1"
    written = "".join(path.read_text(errors="replace") for path in folder.rglob("*") if path.is_file())
    assert "s3cret" not in written + result.stdout.str() and "AIza" not in written + result.stdout.str()
