"""Where exports are found: catalogue datasets, custom export folders, the sample, and absent ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from rf100vl_hf import catalog, paths
from rf100vl_hf.errors import DatasetNotFoundError, UnknownNameError
from rf100vl_hf.rf100vl.builder import load_rf100vl
from rf100vl_hf.rf100vl.sources import custom_exports, locate

from tests.rf100vl.exports import copy_export


def test_an_absent_dataset_says_where_it_looked_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as caught:
        load_rf100vl("aerial-airport", data_dir=tmp_path / "full", fewshot_dir=tmp_path / "fsod", progress=False)
    message = str(caught.value)
    for words in (
        "'aerial-airport' is not in " + str(tmp_path / "full"),
        "download_rf100vl(path='" + str(tmp_path / "full") + "')",
        "download_rf100vl_fsod(path='" + str(tmp_path / "fsod") + "')",
        "ROBOFLOW_API_KEY",
        "$" + paths.DATA_DIR_ENV,
        "load_dataset('<org>/<repo>', 'aerial-airport'",
    ):
        assert words in message
    assert not [entry for entry in caught.traceback if "datasets" in Path(entry.path).parts]


def test_the_data_folder_comes_from_the_environment(shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    copy_export(shared_data / "microcontroller", tmp_path / "full" / "soda-bottles", link_images=True)
    copy_export(shared_data / "microcontroller", tmp_path / "fsod" / "soda-bottles", link_images=True)
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(tmp_path / "full"))
    monkeypatch.setenv(paths.FEWSHOT_DIR_ENV, str(tmp_path / "fsod"))
    source = locate("soda-bottles")
    assert source.root == tmp_path / "full" / "soda-bottles"
    assert source.fewshot_root == tmp_path / "fsod" / "soda-bottles"
    assert (source.domain, source.in_rf20vl) == (catalog.get("soda-bottles").domain, True)


def test_exports_are_also_found_under_their_roboflow_project_names(shared_data: Path, tmp_path: Path) -> None:
    entry = catalog.get("x-ray-id")
    copy_export(shared_data / "microcontroller", tmp_path / "full" / entry.full_project, link_images=True)
    copy_export(shared_data / "microcontroller", tmp_path / "fsod" / entry.fewshot_project, link_images=True)
    source = locate("x-ray-id", tmp_path / "full", tmp_path / "fsod")
    assert source.root.name == entry.full_project
    assert source.fewshot_root is not None and source.fewshot_root.name == entry.fewshot_project


def test_other_exports_in_the_data_folder_are_custom_configs(shared_data: Path, tmp_path: Path) -> None:
    data = tmp_path / "full"
    copy_export(shared_data / "microcontroller", data / "my-boards", link_images=True)
    copy_export(shared_data / "microcontroller", data / "soda-bottles", link_images=True)  # a catalogue dataset
    copy_export(shared_data / "microcontroller", data / ".hidden", link_images=True)
    (data / "not-an-export" / "train").mkdir(parents=True)
    assert custom_exports(data) == ["my-boards"]
    source = locate("my-boards", data, tmp_path / "fsod")
    assert (source.name, source.root, source.domain) == ("my-boards", data / "my-boards", "custom")
    assert source.fewshot_root is None
    with pytest.raises(UnknownNameError, match="closest: my-boards"):
        locate("my-board", data)


def test_sample_is_the_data_folders_or_the_embedded_one(sample_root: Path, tmp_path: Path) -> None:
    assert locate("sample", sample_root).root == sample_root / "sample"
    embedded = locate("sample", tmp_path)
    assert embedded.root.is_relative_to(paths.cache_home())
    assert (embedded.root / "test" / "_annotations.coco.json").is_file()
    assert locate("sample", tmp_path).root == embedded.root


def test_the_cache_home_follows_its_variables(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(paths.CACHE_HOME_ENV, str(tmp_path / "home"))
    assert paths.cache_home() == tmp_path / "home"
    assert paths.default_data_dir() == tmp_path / "home" / "rf100-vl"
    monkeypatch.delenv(paths.CACHE_HOME_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_home() == tmp_path / "xdg" / "rf100vl-hf"
