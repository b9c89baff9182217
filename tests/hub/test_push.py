"""Pushing: clear errors without a usable token, and a push mirrors the folder (stale shards go)."""

from __future__ import annotations

import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.auth import HubAuthError
from rf100vl_hf.hub.card import write_card
from rf100vl_hf.hub.export import write_config
from rf100vl_hf.hub.push import push_repository
from rf100vl_hf.rf100vl.builder import rf100vl_builder

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=:DeprecationWarning")  # huggingface_hub's LFS upload

@pytest.fixture(scope="module")
def small_repo(sample_root, tmp_path_factory):
    """A one-config repository of the sample, written with several train shards."""
    builder = rf100vl_builder("sample", data_dir=sample_root, progress=False)
    builder.download_and_prepare()
    out = tmp_path_factory.mktemp("push") / "repo"
    config = write_config(builder, out, max_shard_bytes=60_000)
    write_card(out, [config], {"license": "apache-2.0"}, "# sample")
    return builder, out


def test_push_without_a_token_says_how_to_log_in(small_repo, hub_server):
    with pytest.raises(HubAuthError, match=r"not logged in to http://127\.0\.0\.1:\d+: log in with `hf auth login`"):
        push_repository(small_repo[1], "org/no-token")
    assert "org/no-token" not in {repo_id for _, repo_id in hub_server.repos}


def test_push_with_a_bad_token_says_it_was_rejected(small_repo, hub_server):
    with pytest.raises(HubAuthError, match=r"rejected the token \(401"):
        push_repository(small_repo[1], "org/bad-token", token="hf_not_a_real_token")


def test_push_to_a_namespace_of_someone_else_is_refused(small_repo, hub_server):
    with pytest.raises(HubAuthError, match="may not write to dataset 'someone-else/data'"):
        push_repository(small_repo[1], "someone-else/data", token=hub_server.token)


def test_a_folder_without_a_card_is_not_a_repository(tmp_path, hub_server):
    with pytest.raises(DataError, match="README.md: missing"):
        push_repository(tmp_path, "org/empty", token=hub_server.token)


def test_a_re_push_mirrors_the_folder_and_deletes_stale_shards(small_repo, hub_server):
    builder, out = small_repo
    push_repository(out, "org/mirror", token=hub_server.token, private=True)
    first = set(hub_server.files("org/mirror"))
    assert sum(p.startswith("sample/train-") for p in first) > 1

    config = write_config(builder, out)  # re-export: one shard per split
    write_card(out, [config], {"license": "apache-2.0"}, "# sample")
    url = push_repository(out, "org/mirror", token=hub_server.token, commit_message="Re-shard")
    local = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert set(hub_server.files("org/mirror")) == local | {".gitattributes"}
    assert hub_server.repos[("dataset", "org/mirror")].private
    assert url.rsplit("/", 1)[1] == hub_server.repos[("dataset", "org/mirror")].branches["main"]


def test_a_push_to_a_branch_creates_it_and_leaves_main(small_repo, hub_server):
    push_repository(small_repo[1], "org/branches", token=hub_server.token, revision="v1")
    repo = hub_server.repos[("dataset", "org/branches")]
    assert set(hub_server.files("org/branches", "v1")) > {"README.md"}
    assert set(hub_server.files("org/branches", "main")) == {".gitattributes"}
    assert repo.branches["v1"] != repo.branches["main"]


def test_a_server_without_xet_gets_the_upload_through_lfs(small_repo, hub_server, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)  # hf_xet is installed: huggingface_hub would use it
    start = len(hub_server.requests)
    push_repository(small_repo[1], "org/no-xet", token=hub_server.token)
    asked = [(method, path, status) for method, path, status in hub_server.requests[start:]]
    assert ("GET", "/api/datasets/org/no-xet/xet-write-token/main", 404) in asked
    assert any(path.endswith(".git/info/lfs/objects/batch") and status == 200 for _, path, status in asked)
    assert set(hub_server.files("org/no-xet")) > {"README.md"}
    assert constants.HF_HUB_DISABLE_XET is False  # restored after the upload


@pytest.mark.parametrize(("status", "meaning"), [
    (404, "has no such repository, revision or file"),
    (413, "refused the upload as too large"),
    (500, "failed on its side: retry later"),
])
def test_an_error_status_says_what_it_means(small_repo, hub_server, status, meaning):
    from rf100vl_hf.network import HubError

    hub_server.fail("commit", status)
    try:
        with pytest.raises(HubError) as caught:
            push_repository(small_repo[1], f"org/status-{status}", token=hub_server.token)
    finally:
        hub_server.clear_faults()
    assert f"{hub_server.url} answered {status} ({meaning}): injected fault: POST" in str(caught.value)


def test_every_status_has_words():
    from rf100vl_hf.network import meaning

    assert meaning(429) == "is limiting the request rate: wait a minute and retry"
    assert meaning(502) == "failed on its side: retry later" and meaning(418) == "refused the request"


@pytest.mark.parametrize(("raised", "expected"), [
    (ConnectionError("Network error: Request error: HTTP status client error (404 Not Found), domain: "
                     "http://hub/api/datasets/org/x/xet-write-token/main"),
     "http://hub answered 404 (has no such repository, revision or file): Network error"),
    (ConnectionError("Name or service not known"), "cannot reach http://hub (ConnectionError: Name or service"),
    (PermissionError(13, "Permission denied"), None),  # a local file: not a Hub error
])
def test_errors_without_an_http_response_are_told_apart(raised, expected):
    from huggingface_hub.errors import OfflineModeIsEnabled

    from rf100vl_hf.network import HubError, bounded

    with pytest.raises(HubError if expected else PermissionError) as caught, bounded("http://hub", "pushing", 5):
        raise raised
    assert expected is None or str(caught.value).startswith(f"pushing: {expected}")
    with pytest.raises(HubError, match=r"^pushing: HF_HUB_OFFLINE is set, so nothing is sent to http://hub"), \
            bounded("http://hub", "pushing", 5):
        raise OfflineModeIsEnabled("offline")
