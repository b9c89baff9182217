"""The stand-in Hub answers the client the way the Hub does where tests rely on it."""

from __future__ import annotations

import hashlib

import pytest
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download
from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import get_session

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")

FILES = {
    "README.md": b"---\nlicense: mit\n---\n# tiny\n",
    "notes/a.txt": b"plain text\n",
    "notes/deeper/b.txt": b"more text\n",
    "data/x.parquet": bytes(range(256)) * 40,  # binary: goes through LFS
    "data/y.bin": b"\0" * 3000,
}


@pytest.fixture(scope="module")
def tiny(hub_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    for path, data in FILES.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    api = HfApi(token=hub_server.token)
    api.create_repo("org/tiny", repo_type="dataset", private=True)
    api.upload_folder(repo_id="org/tiny", repo_type="dataset", folder_path=folder)
    return api


def test_files_are_stored_as_uploaded_and_binaries_go_through_lfs(tiny, hub_server):
    assert hub_server.files("org/tiny") == {**FILES, ".gitattributes": hub_server.files("org/tiny")[".gitattributes"]}
    lfs = {f.path for f in tiny.list_repo_tree("org/tiny", repo_type="dataset", recursive=True) if getattr(f, "lfs", None)}
    assert lfs == {"data/x.parquet", "data/y.bin"}
    put = [path for method, path, _ in hub_server.requests if method == "PUT"]
    assert sorted(put) == sorted(f"/_lfs/{hashlib.sha256(FILES[p]).hexdigest()}" for p in lfs)


def test_tree_listing_is_paginated_when_long(tiny, hub_server, monkeypatch):
    monkeypatch.setattr(hub_server, "tree_page_size", 2)
    start = len(hub_server.requests)
    paths = [f.path for f in tiny.list_repo_tree("org/tiny", repo_type="dataset", recursive=True)]
    assert sorted(paths) == sorted({*FILES, ".gitattributes", "notes", "notes/deeper", "data"})
    pages = [p for _, p, _ in hub_server.requests[start:] if "/tree/" in p]
    assert len(pages) == 5 and all("cursor=" in p for p in pages[1:])


def test_resolve_serves_files_ranges_and_missing_entries(tiny, hub_server):
    path = hf_hub_download("org/tiny", "data/x.parquet", repo_type="dataset", token=hub_server.token)
    assert open(path, "rb").read() == FILES["data/x.parquet"]
    url = f"{hub_server.url}/datasets/org/tiny/resolve/main/data/x.parquet"
    headers = {"Authorization": f"Bearer {hub_server.token}", "Range": "bytes=10-19"}
    response = get_session().get(url, headers=headers)
    assert response.status_code == 206 and response.content == FILES["data/x.parquet"][10:20]
    with pytest.raises(EntryNotFoundError):
        hf_hub_download("org/tiny", "nope.txt", repo_type="dataset", token=hub_server.token)
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/tiny", "README.md", repo_type="dataset", revision="v9", token=hub_server.token)


def test_paths_info_and_fsspec_reads(tiny, hub_server):
    infos = tiny.get_paths_info("org/tiny", ["notes", "notes/a.txt", "missing"], repo_type="dataset")
    assert sorted(i.path for i in infos) == ["notes", "notes/a.txt"]
    fs = HfFileSystem(token=hub_server.token)
    assert fs.read_bytes("datasets/org/tiny/notes/deeper/b.txt") == FILES["notes/deeper/b.txt"]
    assert sorted(fs.glob("datasets/org/tiny/notes/**/*.txt")) == ["datasets/org/tiny/notes/a.txt", "datasets/org/tiny/notes/deeper/b.txt"]


def test_a_private_repository_is_hidden_without_a_token(tiny, hub_server):
    with pytest.raises(RepositoryNotFoundError):
        HfApi(token=False).dataset_info("org/tiny")
    with pytest.raises(HfHubHTTPError, match="401"):
        HfApi(token="hf_wrong").dataset_info("org/tiny")
    assert HfApi(token=hub_server.token).dataset_info("org/tiny").sha == hub_server.repos[("dataset", "org/tiny")].branches["main"]


def test_an_lfs_upload_must_match_its_announced_hash(tiny, hub_server):
    oid = hashlib.sha256(b"announced").hexdigest()
    response = get_session().put(f"{hub_server.url}/_lfs/{oid}", content=b"announced")
    assert response.status_code == 403  # never announced by a batch call
