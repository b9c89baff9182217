"""The test suite never touches a user's run: a benchmark run started in the repository root
loads the suite's ``tests/conftest.py`` (``tests`` is the ``testpaths``), and must still find
the data through ``RF100VL_DATA_DIR`` and keep the user's cache and Hub variables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.plugin.helpers import link, results

REPO = Path(__file__).resolve().parents[2]
ENV_PROBE = """
import json
import os

WATCHED = ("RF100VL_DATA_DIR", "RF100VL_HF_HOME", "HF_DATASETS_CACHE", "HF_HUB_OFFLINE")


def pytest_sessionfinish(session):
    with open("environment-at-end.json", "w", encoding="utf-8") as handle:
        json.dump({name: os.environ.get(name) for name in WATCHED}, handle)
"""


def test_a_plugin_run_from_the_repository_root_keeps_the_users_environment(
    pytester: pytest.Pytester, data_dir: Path, small_sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(REPO / "pyproject.toml", pytester.path)  # testpaths = ["tests"]
    shutil.copytree(REPO / "tests", pytester.path / "tests", ignore=shutil.ignore_patterns("test_*.py", "__pycache__"))
    pytester.makepyfile(envprobe=ENV_PROBE)
    link(data_dir, "mine", small_sample)  # a custom export: found only through RF100VL_DATA_DIR
    user = {
        "RF100VL_DATA_DIR": str(data_dir),
        "RF100VL_HF_HOME": str(tmp_path / "user-home"),
        "HF_DATASETS_CACHE": str(tmp_path / "user-datasets-cache"),
    }
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the user's run is not forced offline

    result = pytester.runpytest_subprocess(
        "-p", "envprobe", "-p", "no:cacheprovider", "--rf100vl-model", "oracle", "--rf100vl-dataset", "mine",
        "--rf100vl-device", "cpu", timeout=300,
    )
    result.assert_outcomes(passed=1)
    environment = json.loads((pytester.path / "environment-at-end.json").read_text(encoding="utf-8"))
    assert environment == {**user, "HF_HUB_OFFLINE": None}
    (row,) = results(pytester.path / ".rf100vl" / "results")
    assert row["dataset"] == "mine" and row["ap"] > 50  # the oracle (the sample's zero-area boxes cap it below 100)
    assert list(Path(user["HF_DATASETS_CACHE"]).glob("rf100vl/mine/*/*/*.arrow"))  # built in the user's cache
