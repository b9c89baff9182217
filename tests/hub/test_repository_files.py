"""What an export writes besides shards and card: ``eval.yaml``, folder modes, and no staging
folder left behind by a killed export; and ``push`` failing clearly when the Hub does."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

from rf100vl_hf.hub.eval_results import rf100vl_eval_yaml
from rf100vl_hf.hub.export import STAGING_PREFIX, staging_dir

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's upload


def test_the_export_declares_the_benchmark_tasks(sample_repo):
    content = yaml.safe_load((sample_repo / "eval.yaml").read_text())
    assert content == rf100vl_eval_yaml()
    assert [t["id"] for t in content["tasks"]] == ["all", "rf20vl", "aerial", "document", "flora-fauna",
                                                    "industrial", "medical", "sports", "other"]


def test_exported_folders_and_files_follow_the_umask(sample_repo):
    mask = os.umask(0)
    os.umask(mask)
    for path in [sample_repo, *sample_repo.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o777 if path.is_dir() else 0o666) & ~mask, path


def test_staging_left_by_a_killed_process_is_removed_by_the_next(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"{STAGING_PREFIX}repo-{int(dead.stdout)}-abcd1234"
    stale.mkdir()
    mine = staging_dir(tmp_path, f"{STAGING_PREFIX}repo-")
    assert not stale.exists()
    other = staging_dir(tmp_path, f"{STAGING_PREFIX}repo-")  # one of a live process stays
    assert mine.exists() and other.exists()


@pytest.mark.parametrize("fault", ["down", "500"])
def test_push_command_fails_in_one_line_with_exit_2(sample_repo, hub_server, capsys, fault, tmp_path):
    from rf100vl_hf.cli import main

    repo = shutil.copytree(sample_repo, tmp_path / "repo")  # a push names its repository in the card
    argv = ["push", str(repo), "--repo-id", f"org/push-{fault}", "--token", hub_server.token]
    if fault == "down":
        with hub_server.down():
            assert main(argv) == 2
    else:
        hub_server.fail("commit", 500)
        try:
            assert main(argv) == 2
        finally:
            hub_server.clear_faults()
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "error" in line]  # a progress bar may precede it
    assert "Traceback" not in err and ("cannot reach" in line if fault == "down" else "answered 500" in line)
    assert main(argv) == 0
