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

from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.eval_yaml import rf100vl_eval_yaml
from rf100vl_hf.hub.export import STAGING_PREFIX, staging_dir
from rf100vl_hf.hub.specification import EVAL_YAML, TASK, eval_yaml_problems

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's upload


def test_the_export_declares_a_task_per_config_with_the_specifications_fields_only(sample_repo):
    content = yaml.safe_load((sample_repo / "eval.yaml").read_text())
    assert eval_yaml_problems(content) == [] and set(content) == set(EVAL_YAML)
    assert content["evaluation_framework"] == "rf100vl-hf"
    assert content["tasks"] == [{"id": "sample", "config": "sample", "split": "test"}]  # no mean: no catalogue dataset


def test_a_full_repository_declares_the_means_each_on_a_config_it_has():
    from rf100vl_hf import catalog

    names = [entry.basename for entry in catalog.select()]
    content = rf100vl_eval_yaml(names)
    means = content["tasks"][:9]
    assert [t["id"] for t in means] == ["all", "rf20vl", "aerial", "document", "flora-fauna", "industrial", "medical",
                                        "sports", "other"]
    assert all(set(task) == set(TASK) and task["config"] in names and task["split"] == "test"
               for task in content["tasks"])
    assert means[3]["config"] == catalog.select(domain="Document")[0].basename
    assert [t["id"] for t in content["tasks"][9:]] == sorted(names)
    rf20 = [entry.basename for entry in catalog.select(subset="rf20vl")]
    assert [t["id"] for t in rf100vl_eval_yaml(rf20)["tasks"]][:1] == ["rf20vl"]  # "all" needs the 100


def test_the_framework_id_is_configurable(monkeypatch):
    monkeypatch.setenv("RF100VL_EVAL_FRAMEWORK", "my-harness")
    assert rf100vl_eval_yaml(["bees"])["evaluation_framework"] == "my-harness"
    monkeypatch.setenv("RF100VL_EVAL_FRAMEWORK", "Not An Id")
    with pytest.raises(DataError, match=r"\$RF100VL_EVAL_FRAMEWORK: evaluation_framework: 'Not An Id' is not a framework"):
        rf100vl_eval_yaml(["bees"])


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
    argv = ["push", str(repo), "--repo-id", f"org/push-{fault}", "--option", f"token={hub_server.token}"]
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
