"""Route c: a repository pushed to the stand-in Hub loads with ``load_dataset("org/name", config)`` unchanged."""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest

from rf100vl_hf.hub import push_repository
from rf100vl_hf.metadata import read_metadata
from tests.hub.source import actual_rows, assert_derived_from_train, classes, expected_rows


pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's LFS upload

@pytest.fixture(scope="module")
def pushed(hub_server):
    """Push each session export once per module; returns the repo id of an ``Exported``."""
    done: dict[str, str] = {}

    def push(exported) -> str:
        repo_id = f"org/rf100vl-{exported.key}"
        if repo_id not in done:
            url = push_repository(exported.repo, repo_id, token=hub_server.token)
            assert url.startswith(f"{hub_server.url}/datasets/{repo_id}/commit/")
            done[repo_id] = url
        return repo_id

    return push


def _local_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_the_hub_holds_exactly_the_folder(exported, pushed, hub_server):
    repo_id = pushed(exported)
    remote = hub_server.files(repo_id)
    remote.pop(".gitattributes")  # the Hub writes it when it creates a repository
    assert remote == _local_files(exported.repo)


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_source_splits_come_back_unchanged(exported, pushed, split):
    loaded = datasets.load_dataset(pushed(exported), exported.name, split=split)
    assert actual_rows(loaded) == expected_rows(exported.export, split)
    assert loaded.features["objects"]["category"].feature.names == classes(exported.export)


def test_derived_splits_and_metadata_come_back(exported, pushed, hub_server):
    repo_id = pushed(exported)
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
