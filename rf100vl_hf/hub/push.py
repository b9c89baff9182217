"""Push a repository folder written by :mod:`.export` and :mod:`.card` to the Hugging Face Hub.

``HfApi.upload_folder`` is used rather than ``upload_large_folder``: it makes one commit
(a loader never sees shards without the card that lists them; with ``hf_xet`` installed it
pipelines very large folders into a few commits and resumes when re-run), it can delete
remote files in the same commit, so shards of an earlier export with a different shard
count do not linger, and it takes a commit message. ``upload_large_folder`` writes
resume state into the folder, cannot delete and always splits the upload into many
commits.

Every Hub call is bounded in time and explained in one line (:mod:`.network`), and the
upload uses Xet only when the server has it (:func:`.network.xet_or_lfs`). The card's
loading example is set to the repository pushed to (:func:`.card.name_repository`), so a
folder exported without ``--push`` is not published saying ``ORG/NAME``.

A folder's ``eval.yaml`` is checked first, as the Hub checks it when it is pushed
(:func:`.eval_yaml.check_eval_yaml`): a file the Hub would refuse is an error before anything
is uploaded, and a framework the Hub does not list yet is a warning.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import HfApi

from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.auth import check_token, refused_as_auth_error
from rf100vl_hf.hub.card import CARD_FILE, name_repository, read_card
from rf100vl_hf.hub.eval_yaml import EVAL_FILE, check_eval_yaml
from rf100vl_hf.hub.export import STAGING_PREFIX
from rf100vl_hf.network import bounded, xet_or_lfs

REPO_TYPE = "dataset"
DEFAULT_COMMIT_MESSAGE = "Upload dataset with rf100vl-hf"


def push_repository(
    path: Path,
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str = DEFAULT_COMMIT_MESSAGE,
    timeout: float | None = None,
) -> str:
    """Make the dataset repository ``repo_id`` hold exactly the folder ``path``; return the commit URL.

    The repository is created if needed (``private`` applies only then), and so is the
    branch ``revision``. The folder is the whole repository: remote files it lacks are
    deleted in the same commit (the Hub's history keeps them), except ``.gitattributes``.
    Its card's loading example is made to name ``repo_id`` first, and its ``eval.yaml`` is
    checked against the configs of the card. Each request times out after ``timeout``
    seconds (see :func:`.network.bounded`).
    """
    path = Path(path)
    if not (path / CARD_FILE).is_file():
        raise DataError(path, CARD_FILE, "missing: not a repository folder written by an export")
    if (path / EVAL_FILE).is_file():
        check_eval_yaml(path, {config.name: {split.name for split in config.splits} for config in read_card(path)})
    name_repository(path, repo_id)
    api = HfApi()
    with bounded(api.endpoint, f"pushing {path} to {repo_id}", timeout):
        token = check_token(api, token)
        return _upload(api, path, repo_id, token, private, revision, commit_message)


def _upload(
    api: HfApi, path: Path, repo_id: str, token: str, private: bool, revision: str | None, commit_message: str
) -> str:
    with refused_as_auth_error(api, repo_id, REPO_TYPE):
        api.create_repo(repo_id, token=token, private=private, repo_type=REPO_TYPE, exist_ok=True)
        if revision is not None:
            api.create_branch(repo_id, branch=revision, token=token, repo_type=REPO_TYPE, exist_ok=True)
        with xet_or_lfs(api.endpoint, repo_id, REPO_TYPE, token, revision):
            info = api.upload_folder(
                repo_id=repo_id,
                folder_path=path,
                repo_type=REPO_TYPE,
                token=token,
                revision=revision,
                commit_message=commit_message,
                ignore_patterns=[f"{STAGING_PREFIX}*", f"*/{STAGING_PREFIX}*"],
                delete_patterns=["*"],
            )
    return info.commit_url
