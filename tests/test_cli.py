"""``rf100vl-hf``: each command on generated data, through ``main`` as the console script calls it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rf100vl_hf.cli import main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for command in ("list", "info", "prepare", "export", "push", "sample", "uouo"):
        assert command in text
    assert "RF100VL_DATA_DIR" in text and "HF_DATASETS_CACHE" in text


def test_list_filters_by_domain_and_subset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["list", "--domain", "Medical", "--data-dir", str(tmp_path)]) == 0
    assert "13 datasets" in capsys.readouterr().out
    assert main(["list", "--subset", "rf20vl", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "20 datasets" in out and "soda-bottles" in out and "bees " not in out


def test_list_shows_custom_exports_on_disk(capsys, sample_root: Path, tmp_path: Path) -> None:
    shutil.copytree(sample_root / "sample", tmp_path / "shapes")
    assert main(["list", "--data-dir", str(tmp_path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("shapes"))
    assert "custom" in line and line.rstrip().endswith("yes")


def test_unknown_name_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["info", "bess", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rf100vl-hf: error: unknown dataset 'bess'") and "bees" in err


def test_info_of_an_absent_dataset_says_how_to_get_it(capsys, tmp_path: Path) -> None:
    assert main(["info", "bees", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Flora & Fauna" in out and "download_rf100vl" in out and str(tmp_path) in out


def test_info_describes_an_export_on_disk(capsys, sample_root: Path) -> None:
    assert main(["info", "sample", "--data-dir", str(sample_root)]) == 0
    out = capsys.readouterr().out
    assert "classes (3): circle, square, triangle" in out
    assert "few-shot split: generated (circle 10, square 10, triangle 10)" in out
    assert "annotator instructions: 3 of 3 classes" in out


def test_prepare_then_bare_load_dataset(sample_root: Path, tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    assert main(["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(cache)]) == 0
    assert "load_dataset('rf100vl', 'sample', split='test')" in capsys.readouterr().out
    script = (
        "from datasets import load_dataset;"
        f"print(len(load_dataset('rf100vl', 'sample', split='fewshot_10', cache_dir={str(cache)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={"HF_HUB_OFFLINE": "1", "PATH": ""}, check=True)
    assert int(done.stdout.strip()) > 0


def test_prepare_with_parameters_names_the_config_id(sample_root: Path, tmp_path: Path, capsys) -> None:
    args = ["prepare", "sample", "--data-dir", str(sample_root), "--cache-dir", str(tmp_path), "--fewshot-k", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "fewshot_3" in out and "config id 'sample-fewshot_k=3'" in out


def test_sample_writes_an_export(tmp_path: Path, capsys) -> None:
    assert main(["sample", "--out", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "test" / "_annotations.coco.json").is_file()
    assert (tmp_path / "s" / "README.dataset.txt").is_file()


def test_push_of_a_folder_that_is_not_a_repository(tmp_path: Path, capsys) -> None:
    assert main(["push", str(tmp_path), "--repo-id", "org/x", "--token", "t"]) == 2
    assert "README.md: missing" in capsys.readouterr().err
