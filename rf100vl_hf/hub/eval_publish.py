"""Push a model's ``.eval_results`` files (:mod:`.eval_results`) to its repository on the Hub.

Before anything is committed:

- the benchmark dataset is read at its current commit (or ``benchmark_revision``): its
  ``eval.yaml`` must meet the specification, and entries of tasks it does not declare are
  left out; every entry gets that commit as ``dataset.revision``;
- entries with a ``source`` get the pusher's attribution from the token's identity:
  ``source.org`` when the source repository belongs to one of the token's organisations,
  else ``source.user``;
- each file is checked with huggingface_hub's parser and against the specification, and
  the rows' checkpoint must be the model repository (:func:`.eval_results.check_model_repo`).

With ``create_pr``, an open pull request of the same user that already carries these files
is updated with a new commit on its ref (``refs/pr/N``) instead of a second pull request
being opened with the same scores.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf.hub.eval_results import EvalFile, EvalResultsError, check_model_repo, write_eval_files
from rf100vl_hf.hub.eval_yaml import EVAL_FILE, read_eval_yaml, warn_if_unregistered
from rf100vl_hf.hub.pull_requests import eval_pull_requests
from rf100vl_hf.network import bounded, xet_or_lfs

COMMIT_MESSAGE = "Add evaluation results (rf100vl-hf)"


@dataclass(frozen=True)
class PublishedEvalResults:
    """What a push did: the commit (or pull request) URL, the pull request it is on (None:
    committed to ``main``), whether it updated one already open, whether anything changed,
    the benchmark commit the entries name, and the tasks left out and why."""

    url: str
    pull_request: int | None
    updated: bool
    changed: bool
    benchmark_revision: str
    left_out: dict[str, str]


def _attribution(source_url: str | None, identity: dict[str, Any]) -> dict[str, str | None]:
    """``source.user`` or ``source.org``: the organisation owning the source repository when the
    token's user belongs to it, else the user."""
    if not source_url:
        return {}
    match = re.search(r"/(?:datasets/|spaces/)?([^/]+)/[^/]+/?$", source_url)
    owner = match.group(1) if match else None
    orgs = {org.get("name") for org in identity.get("orgs", []) if isinstance(org, dict)}
    if owner and owner in orgs:
        return {"source_org": owner}
    return {"source_user": identity.get("name")}


def benchmark_tasks(api: Any, benchmark: str, revision: str | None, token: str | None) -> tuple[str, set[str]]:
    """The benchmark's commit and the task ids its ``eval.yaml`` declares there."""
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        sha = api.dataset_info(benchmark, revision=revision, token=token).sha
    except RepositoryNotFoundError:
        raise EvalResultsError(f"--benchmark {benchmark}: no such dataset on {api.endpoint} (or it is private "
                               "to another account)") from None
    except RevisionNotFoundError:
        raise EvalResultsError(f"--benchmark-revision {revision}: not a revision of {benchmark}") from None
    try:
        path = api.hf_hub_download(benchmark, EVAL_FILE, repo_type="dataset", revision=sha, token=token)
    except EntryNotFoundError:
        raise EvalResultsError(f"--benchmark {benchmark}: it has no {EVAL_FILE} at {sha[:12]}, so it is not a "
                               "benchmark (export it with rf100vl-hf export and push it)") from None
    where = f"{benchmark}@{sha[:12]}/{EVAL_FILE}"
    data = read_eval_yaml(Path(path).read_text(encoding="utf-8"), where)
    warn_if_unregistered(data, where)
    return sha, {task["id"] for task in data["tasks"]}


def _declared(files: Sequence[EvalFile], tasks: set[str], benchmark: str, changes: dict[str, Any]
              ) -> tuple[list[EvalFile], dict[str, str]]:
    left_out: dict[str, str] = {}
    kept = []
    for file in files:
        entries = []
        for entry in file.entries:
            if entry.task_id in tasks:
                entries.append(dataclasses.replace(entry, **changes))
            else:
                left_out[entry.task_id] = f"not a task of {benchmark}'s {EVAL_FILE}"
        kept.append(dataclasses.replace(file, entries=entries))
    return kept, left_out


def publish_eval_results(
    files: Sequence[EvalFile],
    model_repo: str,
    benchmark: str,
    token: str | None = None,
    create_pr: bool = False,
    benchmark_revision: str | None = None,
    timeout: float | None = None,
    mismatch_ok: bool = False,
) -> PublishedEvalResults:
    """Commit the files into the existing model repository ``model_repo`` (see the module);
    rows of another checkpoint are refused unless ``mismatch_ok``."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    from rf100vl_hf.hub.auth import check_token, refused_as_auth_error

    if not any(file.entries for file in files):
        skipped = "; ".join(f"{task}: {why}" for file in files for task, why in file.skipped.items())
        raise EvalResultsError(f"no task is covered by the rows ({skipped or 'no rows'})")
    check_model_repo(files, model_repo, mismatch_ok)
    api = HfApi()
    with bounded(api.endpoint, f"pushing evaluation results to {model_repo}", timeout) as seconds:
        token = check_token(api, token)
        identity = api.whoami(token=token)
        sha, tasks = benchmark_tasks(api, benchmark, benchmark_revision, token)
        source_url = next((entry.source_url for file in files for entry in file.entries), None)
        files, left_out = _declared(files, tasks, benchmark, {"dataset_revision": sha,
                                                              **_attribution(source_url, identity)})
        if not any(file.entries for file in files):
            raise EvalResultsError(f"--benchmark {benchmark}: its {EVAL_FILE} declares none of the tasks of the "
                                   f"rows ({', '.join(sorted(left_out))})")
        try:
            head = api.model_info(model_repo, token=token, timeout=seconds).sha
        except RepositoryNotFoundError:
            raise EvalResultsError(f"--model-repo {model_repo}: no such model repository on {api.endpoint} "
                                   "(evaluation results go to an existing model)") from None
        with tempfile.TemporaryDirectory(prefix="rf100vl-eval-") as staging:
            operations = [CommitOperationAdd(path.relative_to(staging).as_posix(), str(path))
                          for path in write_eval_files(files, Path(staging))]
            paths = {operation.path_in_repo for operation in operations}
            with refused_as_auth_error(api, model_repo, "model"), xet_or_lfs(api.endpoint, model_repo, "model", token):
                open_pr = next((pr for pr in eval_pull_requests(api, model_repo, token, author=identity.get("name"))
                                if paths & set(pr.files)), None) if create_pr else None
                if open_pr is not None:
                    head = api.model_info(model_repo, revision=open_pr.ref, token=token, timeout=seconds).sha
                info = api.create_commit(model_repo, operations, commit_message=COMMIT_MESSAGE, token=token,
                                         repo_type="model", revision=open_pr.ref if open_pr else None,
                                         create_pr=create_pr and open_pr is None)
    changed = info.oid != head  # huggingface_hub makes no commit when nothing changed
    if open_pr is not None:
        return PublishedEvalResults(open_pr.url, open_pr.num, True, changed, sha, left_out)
    if info.pr_url:
        return PublishedEvalResults(info.pr_url, info.pr_num, False, changed, sha, left_out)
    return PublishedEvalResults(info.commit_url, None, False, changed, sha, left_out)
