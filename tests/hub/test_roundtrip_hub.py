"""Route c: a repository pushed to the stand-in Hub loads with ``load_dataset("org/name", config)`` unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import datasets
import pytest

from rf100vl_hf.hub.push import push_repository
from rf100vl_hf.metadata import read_metadata

from tests.hub.source import actual_rows, assert_derived_from_train, classes, expected_rows

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's LFS upload

@pytest.fixture(scope="module")
def pushed(hub_server, tmp_path_factory):
    """Push a copy of each session export once per module (a push names its repository in the
    card); returns the repo id of an ``Exported`` and the folder pushed."""
    done: dict[str, Path] = {}

    def push(exported) -> tuple[str, Path]:
        repo_id = f"org/rf100vl-{exported.key}"
        if repo_id not in done:
            folder = Path(shutil.copytree(exported.repo, tmp_path_factory.mktemp("pushed") / "repo"))
            url = push_repository(folder, repo_id, token=hub_server.token)
            assert url.startswith(f"{hub_server.url}/datasets/{repo_id}/commit/")
            done[repo_id] = folder
        return repo_id, done[repo_id]

    return push


def _local_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_hub_holds_exactly_the_folder_its_card_naming_the_repository(exported, pushed, hub_server):
    repo_id, folder = pushed(exported)
    remote = hub_server.files(repo_id)
    remote.pop(".gitattributes")  # the Hub writes it when it creates a repository
    assert remote == _local_files(folder)
    card = remote["README.md"].decode()
    assert f'ds = load_dataset("{repo_id}", ' in card and "ORG/NAME" not in card
    assert 'load_dataset("ORG/NAME", ' in (exported.repo / "README.md").read_text()  # exported without a repo id


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_source_splits_come_back_unchanged(exported, pushed, split):
    loaded = datasets.load_dataset(pushed(exported)[0], exported.name, split=split)
    assert actual_rows(loaded) == expected_rows(exported.export, split)
    assert loaded.features["objects"]["category"].feature.names == classes(exported.export)


def test_derived_splits_and_metadata_come_back(exported, pushed, hub_server):
    repo_id, _ = pushed(exported)
    loaded = datasets.load_dataset(repo_id, exported.name)
    served = {path for method, path, status in hub_server.requests if method == "GET" and status == 200}
    assert any(f"/datasets/{repo_id}/resolve/" in p and f"/{exported.name}/test-" in p for p in served)
    local = datasets.load_dataset(str(exported.repo), exported.name)
    for split in local:
        assert actual_rows(loaded[split]) == actual_rows(local[split]), split
    meta = read_metadata(loaded)
    assert meta["name"] == exported.name and meta["classes"] == classes(exported.export)
    assert meta == read_metadata(local)
    assert_derived_from_train(actual_rows(loaded[meta["fewshot"]["split"]]), exported.export)
