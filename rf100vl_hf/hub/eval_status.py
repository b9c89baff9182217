"""What the Hub made of evaluation results: the entries it lists for a model (and the files
it refused), the open pull requests that carry scores, and the benchmarks' leaderboards.

The model's entries come from ``GET /api/models/{repo}?expand=evalResults``, the request of
``HfApi.model_info(expand=["evalResults"])``, read here as the Hub answers it: ``model_info``
keeps the parsed entries only and drops the file each came from, its pull request and the
files the Hub refused (with why), which are what this read-back is for. The entries are
parsed with huggingface_hub's own ``parse_eval_result_entries``; an answer of another shape
(an HTML page, a JSON list, ``evalResults`` that is no list of objects) is a one-line
:class:`~rf100vl_hf.network.HubError`. Leaderboards come from ``HfApi.get_dataset_leaderboard``.

Every text the Hub sent (notes, file names, why a file was refused) is printed with the
characters that act on a terminal written as escapes (:mod:`rf100vl_hf.controls`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rf100vl_hf.controls import visible
from rf100vl_hf.hub.eval_yaml import EVAL_FILE
from rf100vl_hf.hub.pull_requests import EvalPullRequest, eval_pull_requests
from rf100vl_hf.hub.specification import FRAMEWORKS_DATE, framework_registered
from rf100vl_hf.network import HubError, answered, bounded, status_of


@dataclass(frozen=True)
class ListedEntry:
    """One entry the Hub lists for the model."""

    filename: str
    dataset: str
    task_id: str
    value: Any
    pull_request: int | None
    notes: str | None


@dataclass(frozen=True)
class PullRequestScores:
    """An open pull request with evaluation results, and the tasks of its files (path -> task ids)."""

    pull_request: EvalPullRequest
    tasks: dict[str, list[str]]


@dataclass(frozen=True)
class Ranked:
    """One row of a benchmark's leaderboard."""

    task_id: str | None  # when the Hub says
    rank: int
    model_id: str
    value: Any
    pull_request: int | None
    notes: str | None


@dataclass(frozen=True)
class Leaderboard:
    """A benchmark's leaderboard, or why there is none; its framework and whether the Hub lists it."""

    dataset: str
    rows: list[Ranked]
    problem: str | None
    framework: str | None
    registered: bool | None


@dataclass(frozen=True)
class HubStatus:
    model_repo: str
    endpoint: str
    entries: list[ListedEntry]
    refused: dict[str, str]  # file -> why the Hub refused it
    pull_requests: list[PullRequestScores]
    leaderboards: list[Leaderboard] = field(default_factory=list)


def listed_results(api: Any, repo_id: str, token: str | None, seconds: float) -> tuple[list[ListedEntry], dict[str, str]]:
    """The entries the Hub lists for ``repo_id``, and the files it refused (file -> why)."""
    from huggingface_hub import parse_eval_result_entries
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    route = f"{api.endpoint}/api/models/{repo_id}"
    response = get_session().get(route, params={"expand": "evalResults"}, headers=build_hf_headers(token=token),
                                 timeout=seconds)
    hf_raise_for_status(response)
    entries, refused = [], {}
    for item in _eval_results(response, repo_id, route):
        if "error" in item:
            refused[str(item.get("filename"))] = str(item["error"])
            continue
        try:
            (entry,) = parse_eval_result_entries([item])
        except (KeyError, TypeError, ValueError) as exc:
            refused[str(item.get("filename"))] = f"listed, but not readable as an entry ({exc})"
            continue
        entries.append(ListedEntry(str(item.get("filename")), entry.dataset_id, entry.task_id, entry.value,
                                   item.get("pullRequest"), entry.notes))
    return entries, refused


def _eval_results(response: Any, repo_id: str, route: str) -> list[dict[str, Any]]:
    """The ``evalResults`` of the model route's answer; a :class:`HubError` naming the route
    when the answer is not a JSON object whose ``evalResults`` (if any) is a list of objects."""
    try:
        answer = response.json()
    except ValueError:
        shape = f"{(response.headers.get('content-type') or 'no content type').split(';')[0]} that is not JSON"
    else:
        items = (answer.get("evalResults") or []) if isinstance(answer, dict) else None
        if isinstance(items, list) and all(isinstance(item, dict) for item in items):
            return items
        shape = (f"a JSON {type(answer).__name__}" if items is None
                 else "evalResults holding non-objects" if isinstance(items, list)
                 else f"evalResults of type {type(items).__name__}")
    raise HubError(f"reading what the Hub lists for {repo_id}: {route} answered {shape}, not a model's evaluation "
                   "results")


def _pull_request_tasks(api: Any, repo_id: str, pr: EvalPullRequest, token: str | None) -> dict[str, list[str]]:
    """The task ids (``dataset:task``) of each of the pull request's files."""
    import yaml

    tasks = {}
    for path in sorted(pr.files):
        local = api.hf_hub_download(repo_id, path, revision=pr.ref, token=token)
        try:
            data = yaml.safe_load(Path(local).read_text(encoding="utf-8"))
            tasks[path] = [f"{item['dataset']['id']}:{item['dataset']['task_id']}" for item in data]
        except (yaml.YAMLError, TypeError, KeyError):
            tasks[path] = ["(not readable as evaluation results)"]
    return tasks


def leaderboard(api: Any, dataset: str, token: str | None, seconds: float) -> Leaderboard:
    """The benchmark's leaderboard (the Hub's default view), or the Hub's answer when it has none."""
    import yaml
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError


    framework = None
    try:
        path = api.hf_hub_download(dataset, EVAL_FILE, repo_type="dataset", token=token)
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        framework = data.get("evaluation_framework") if isinstance(data, dict) else None
    except EntryNotFoundError:
        return Leaderboard(dataset, [], f"it has no {EVAL_FILE}: not a benchmark", None, None)
    except (HfHubHTTPError, yaml.YAMLError) as exc:
        return Leaderboard(dataset, [], f"its {EVAL_FILE} cannot be read ({str(exc).splitlines()[0]})", None, None)
    registered = framework_registered(framework) if isinstance(framework, str) else None
    try:
        ranked = api.get_dataset_leaderboard(dataset, token=token, timeout=seconds)
    except HfHubHTTPError as exc:
        reason = (exc.server_message or str(exc)).strip().splitlines()[0]
        problem = f"{api.endpoint} has no leaderboard for it: {reason}" if status_of(exc) == 404 else \
            answered(api.endpoint, status_of(exc), reason)
        return Leaderboard(dataset, [], problem, framework, registered)
    rows = [Ranked(getattr(entry, "taskId", None), entry.rank, entry.model_id, entry.value, entry.pull_request,
                   entry.notes) for entry in ranked]
    return Leaderboard(dataset, rows, None, framework, registered)


def hub_status(model_repo: str, datasets: Sequence[str] = (), token: str | None = None,
               timeout: float | None = None) -> HubStatus:
    """What the Hub lists for ``model_repo``, its open pull requests with scores, and the
    leaderboards of ``datasets`` (default: every benchmark the model's entries name)."""
    from huggingface_hub import HfApi

    from rf100vl_hf.hub.auth import known_token

    api = HfApi()
    token = known_token(token)
    with bounded(api.endpoint, f"reading what the Hub lists for {model_repo}", timeout) as seconds:
        entries, refused = listed_results(api, model_repo, token, seconds)
        pulls = [PullRequestScores(pr, _pull_request_tasks(api, model_repo, pr, token))
                 for pr in eval_pull_requests(api, model_repo, token)]
        named = [entry.dataset for entry in entries] + [task.split(":")[0] for pr in pulls
                                                         for tasks in pr.tasks.values() for task in tasks if ":" in task]
        boards = [leaderboard(api, dataset, token, seconds) for dataset in dict.fromkeys(list(datasets) or named)]
    return HubStatus(model_repo, api.endpoint, entries, refused, pulls, boards)


def status_lines(status: HubStatus) -> list[str]:
    """The read-back as the ``hub-status`` command prints it."""

    lines = [f"model {status.model_repo} on {status.endpoint}:"]
    if status.entries:
        lines.append(f"  the Hub lists {len(status.entries)} evaluation result(s):")
        lines += [f"    {e.dataset} {e.task_id}: {e.value}  ({e.filename}"
                  + (f", pull request #{e.pull_request}" if e.pull_request else ", main") + ")"
                  + (f"  notes: {e.notes}" if e.notes else "") for e in status.entries]
    else:
        lines.append("  the Hub lists no evaluation results")
    lines += [f"  refused by the Hub: {name}: {why}" for name, why in status.refused.items()]
    if status.pull_requests:
        lines.append("open pull requests with evaluation results:")
        for item in status.pull_requests:
            pr = item.pull_request
            lines.append(f"  #{pr.num} {pr.title!r} by {pr.author} ({pr.url}):")
            lines += [f"    {path}: {', '.join(tasks)}" for path, tasks in item.tasks.items()]
    else:
        lines.append("no open pull request carries evaluation results")
    for board in status.leaderboards:
        state = "" if board.framework is None else f" (evaluation_framework {board.framework}" + (
            "" if board.registered else f", not in the Hub's list of frameworks as of {FRAMEWORKS_DATE}: "
            "see docs/publishing.md, 'Registering the framework'") + ")"
        lines.append(f"leaderboard of {board.dataset}{state}:")
        if board.problem:
            lines.append(f"  none: {board.problem}")
        elif not board.rows:
            lines.append("  no models ranked yet")
        lines += [f"  {(r.task_id + ': ') if r.task_id else ''}{r.rank}. {r.model_id} {r.value}"
                  + (f" (pull request #{r.pull_request})" if r.pull_request else "")
                  + (f"  notes: {r.notes}" if r.notes else "") for r in board.rows]
    return [visible(line) for line in lines]
