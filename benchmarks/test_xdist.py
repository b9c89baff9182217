"""Wall time of ``pytest -n 2`` against one process, in the same run: two models x three
datasets (the sample's 8 test images each), with adapters whose forward is a fixed sleep per
batch (as a model on its own device would take), in fresh ``python -m pytest`` processes,
alternating rounds. Every round reruns every pair (``--rf100vl-rerun``) with the answer cache
off, so both sides do all the work. Target: the two workers take at most 0.7x the single
process's wall time (start-up included).

Run with ``pytest benchmarks/test_xdist.py -s`` to see the figures.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROUNDS = 2
SLEEP_S = 0.5  # per batch of one image: 48 batches, 24 s of "model" in all
MAX_RATIO = 0.7
ADAPTERS = Path(__file__).parents[1] / "tests" / "plugin" / "scale_adapters.py"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the counting adapters as its conftest and three datasets."""
    from rf100vl_hf.sample import write_sample_export

    root = tmp_path_factory.mktemp("xdist")
    shutil.copy(ADAPTERS, root / "conftest.py")
    export = write_sample_export(root / "sample", sizes={"test": 8})
    (root / "data").mkdir()
    for name in ("alpha", "beta", "gamma"):
        (root / "data" / name).symlink_to(export, target_is_directory=True)
    return root


def timed_run(project: Path, results: str, *extra: str) -> float:
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
        "--rf100vl-model", "counter:a", "--rf100vl-model", "counter:b", "--rf100vl-dataset", "alpha,beta,gamma",
        "--rf100vl-data-option", "data-dir=data", "--rf100vl-device", "cpu", "--override-ini", "rf100vl_cache=off",
        "--rf100vl-rerun",
        "--rf100vl-results", results, *extra,
    ]
    env = {**os.environ, "SCALE_LOG": str(project / "asked.log"), "SCALE_SLEEP": str(SLEEP_S)}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return seconds


def test_two_workers_take_at_most_0_7x_the_wall_time_of_one_process(project: Path) -> None:
    timed_run(project, "warm")  # prepares the datasets once, for both sides
    single, workers = [], []
    for _ in range(ROUNDS):
        single.append(timed_run(project, "single"))
        workers.append(timed_run(project, "workers", "-n", "2"))
    ratio = statistics.median(workers) / statistics.median(single)
    print(
        f"\nsingle process: median {statistics.median(single):.2f} s {[round(s, 2) for s in single]}; "
        f"-n 2: median {statistics.median(workers):.2f} s {[round(s, 2) for s in workers]}; ratio {ratio:.2f} "
        f"(target <= {MAX_RATIO})"
    )
    assert ratio <= MAX_RATIO
