"""Open pull requests of a model repository that carry evaluation results: the
``.eval_results`` files each one adds or changes against ``main``.

A pull request's files live on its ref ``refs/pr/N``; a push of new scores commits to the
pull request that already carries them (:mod:`.eval_publish`) instead of opening another,
and ``rf100vl-hf results hub-status`` lists them (:mod:`.eval_status`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rf100vl_hf.hub.eval_results import EVAL_FOLDER


@dataclass(frozen=True)
class EvalPullRequest:
    """An open pull request and the ``.eval_results`` files it changes (path -> blob id)."""

    num: int
    title: str
    author: str
    url: str
    ref: str  # refs/pr/N
    files: dict[str, str]


def eval_files_at(api: Any, repo_id: str, revision: str, token: str | None) -> dict[str, str]:
    """The ``.eval_results`` files of ``repo_id`` at ``revision``: path -> blob id."""
    from huggingface_hub.errors import EntryNotFoundError

    try:
        entries = list(api.list_repo_tree(repo_id, path_in_repo=EVAL_FOLDER, revision=revision, token=token))
    except EntryNotFoundError:
        return {}
    return {entry.path: entry.blob_id for entry in entries if hasattr(entry, "blob_id")}


def eval_pull_requests(api: Any, repo_id: str, token: str | None, author: str | None = None) -> list[EvalPullRequest]:
    """The open pull requests of the model ``repo_id`` (of ``author`` only, when given) whose
    ``.eval_results`` files differ from ``main``'s, newest first."""
    main = eval_files_at(api, repo_id, "main", token)
    found = []
    for discussion in api.get_repo_discussions(repo_id, author=author, discussion_type="pull_request",
                                               discussion_status="open", token=token):
        files = eval_files_at(api, repo_id, discussion.git_reference, token)
        changed = {path: blob for path, blob in files.items() if main.get(path) != blob}
        if changed:
            found.append(EvalPullRequest(discussion.num, discussion.title, discussion.author, discussion.url,
                                         discussion.git_reference, changed))
    return sorted(found, key=lambda pr: -pr.num)
