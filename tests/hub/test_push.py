"""Pushing: clear errors without a usable token, and a push mirrors the folder (stale shards go)."""

from __future__ import annotations

import pytest

from rf100vl_hf.errors import DataError
from rf100vl_hf.hub import HubAuthError, push_repository, write_card, write_config
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
