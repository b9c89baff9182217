"""``loading_scripts/rf100vl.py``: explains itself, builds the repository, pushes it."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import datasets
import pytest

from rf100vl_hf.hub.rf100vl_card import datasets_on_disk

SCRIPT = Path(__file__).resolve().parents[2] / "loading_scripts" / "rf100vl.py"
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("rf100vl_loading_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_explains_every_option(script, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--data-dir", "--fewshot-dir", "--dataset", "--out", "--push", "--option", "private:"):
        assert option in text
    assert "load_dataset" in text and "HF_TOKEN" in text


def test_default_datasets_are_those_on_disk(sample_root, tmp_path):
    shutil.copytree(sample_root / "sample", tmp_path / "shapes")
    (tmp_path / "not-an-export").mkdir()
    assert datasets_on_disk(tmp_path) == ["shapes"]


def test_nothing_on_disk_is_a_clear_error(script, tmp_path, capsys):
    assert script.main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert f"no dataset found in {tmp_path}" in capsys.readouterr().err


def test_build_and_push(script, sample_root, tmp_path, hub_server, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", hub_server.token)
    data_dir = tmp_path / "data"
    shutil.copytree(sample_root / "sample", data_dir / "shapes")
    out = tmp_path / "repo"
    assert script.main(["--data-dir", str(data_dir), "--out", str(out), "--push", "org/shapes", "--option", "private=true"]) == 0
    assert f"pushed: {hub_server.url}/datasets/org/shapes/commit/" in capsys.readouterr().out
    assert 'load_dataset("org/shapes", "shapes"' in (out / "README.md").read_text()
    assert hub_server.repos[("dataset", "org/shapes")].private
    loaded = datasets.load_dataset("org/shapes", "shapes", split="test", token=hub_server.token)
    assert len(loaded) == len(datasets.load_dataset(str(out), "shapes", split="test"))
