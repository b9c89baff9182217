"""What the plugin costs around a pair: a pytest oracle run on a prepared dataset against the
obvious floor, iterating the same split's rows (images decoded) in a fresh process.

Both run in fresh processes, in alternating rounds; the median ratio is printed (target: at
most 1.5x). The oracle does no model work, so the ratio is the plugin's own overhead:
start-up, collection, the session, decoding, scoring and the results files.

    pytest benchmarks/test_plugin_overhead.py -s
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rf100vl_hf.rf100vl.builder import load_rf100vl
from rf100vl_hf.sample import write_sample_export

NAME = "shapes-test-2k"
SIZES = {"train": 8, "valid": 8, "test": 2000}
ROUNDS = 3
TARGET_RATIO = 1.5

ITERATE = r"""
import sys
from rf100vl_hf.rf100vl.builder import load_rf100vl
ds = load_rf100vl(sys.argv[1], split="test", data_dir=sys.argv[2], progress=False)
for row in ds:
    row["image"].load()
"""


def _timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=os.environ.copy())
    return time.perf_counter() - start


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("overhead")
    write_sample_export(root / NAME, sizes=SIZES)
    load_rf100vl(NAME, data_dir=root, progress=False)  # prepared once, as a user's second run finds it
    return root


def test_an_oracle_run_costs_at_most_a_half_more_than_iterating_the_rows(data_dir: Path, tmp_path: Path) -> None:
    iterate = [sys.executable, "-c", ITERATE, NAME, str(data_dir)]
    oracle = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rf100vl-model", "oracle",
              "--rf100vl-dataset", NAME, f"--rf100vl-data-option=data-dir={data_dir}", "--rf100vl-device", "cpu",
              "--rf100vl-rerun", "--override-ini", "rf100vl_cache=off", f"--rf100vl-results={tmp_path / 'results'}",
              "--benchmark-disable"]  # one pass, as iterating the rows is (timing rounds are a choice)
    floor, plugin = [], []
    for _ in range(ROUNDS):  # alternate, so load on this machine hits both alike
        floor.append(_timed(iterate, tmp_path))
        plugin.append(_timed(oracle, tmp_path))
    ratio = statistics.median(plugin) / statistics.median(floor)
    print(f"\n{SIZES['test']} images: iterating the rows {statistics.median(floor):.2f} s (median of {ROUNDS}), "
          f"pytest oracle run {statistics.median(plugin):.2f} s; ratio {ratio:.2f}x (target <= {TARGET_RATIO}x)")
    assert ratio <= TARGET_RATIO * 1.5, "far beyond the target: the plugin's overhead has regressed"
