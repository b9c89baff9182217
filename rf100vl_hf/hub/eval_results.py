"""The Hub's evaluation results: ``eval.yaml`` for the benchmark datasets, and
``.eval_results/*.yaml`` entries for model repositories.

A benchmark dataset declares its tasks in ``eval.yaml`` at the root of its repository; a
model repository reports scores on those tasks in ``.eval_results/*.yaml``, which the Hub
shows on the model page and aggregates into the benchmark's leaderboard. The entries are
built with huggingface_hub's own ``EvalResultEntry`` and ``eval_result_entries_to_yaml``.

Tasks:

- RF100-VL: ``all`` (mean AP50:95 over the 100 datasets), ``rf20vl`` (over the RF20-VL
  subset) and one per domain (``aerial``, ``document``, ``flora-fauna``, ``industrial``,
  ``medical``, ``sports``, ``other``), each over the ``test`` split;
- UOUO: ``random`` and ``mmd`` (mIoU), ``random-quadrant`` and ``mmd-quadrant`` (quadrant
  accuracy), each on its config's ``test`` split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import DataError, Rf100vlError

EVAL_FILE = "eval.yaml"
EVAL_FOLDER = ".eval_results"
FRAMEWORK = "rf100vl-hf"
DEFAULT_PROMPT = "names"
DEFAULT_SPLIT = "test"
SMOKE_NOTE = "smoke run: random weights, the score means nothing"
"""In the notes of an entry computed from a smoke row (random weights, or a replay of them)."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def rf100vl_tasks() -> dict[str, tuple[str, list[str]]]:
    """Task id -> (description, the catalogue datasets its mean covers)."""
    from rf100vl_hf.rf100vl import catalog

    tasks = {
        "all": ("Mean AP50:95 (%) over the 100 datasets, maxDets 500", [e.basename for e in catalog.select()]),
        "rf20vl": ("Mean AP50:95 (%) over the RF20-VL subset", [e.basename for e in catalog.select(subset="rf20vl")]),
    }
    for domain in catalog.DOMAINS:
        tasks[_slug(domain)] = (f"Mean AP50:95 (%) over the {domain} datasets",
                                [e.basename for e in catalog.select(domain=domain)])
    return tasks


UOUO_TASKS: dict[str, tuple[str, str, str]] = {
    "random": ("mIoU of the answered boxes on random mosaics", "uouo-random", "miou"),
    "mmd": ("mIoU of the answered boxes on hard (MMD-nearest) mosaics", "uouo-mmd", "miou"),
    "random-quadrant": ("quadrant accuracy on random mosaics", "uouo-random", "accuracy"),
    "mmd-quadrant": ("quadrant accuracy on hard (MMD-nearest) mosaics", "uouo-mmd", "accuracy"),
}
"""UOUO task id -> (description, results dataset, row key)."""


def rf100vl_eval_yaml() -> dict[str, Any]:
    """The ``eval.yaml`` of an RF100-VL benchmark repository (its tasks are means over configs)."""
    return {
        "name": "RF100-VL",
        "description": "Roboflow100-VL: 100 object-detection datasets in 7 domains, scored by pycocotools "
                       "AP50:95 at maxDets 500 on each test split and averaged per domain.",
        "evaluation_framework": FRAMEWORK,
        "tasks": [{"id": task, "description": description, "split": DEFAULT_SPLIT}
                  for task, (description, _) in rf100vl_tasks().items()],
    }


def uouo_eval_yaml(configs: Sequence[str] = ("random", "mmd")) -> dict[str, Any]:
    """The ``eval.yaml`` of a UOUO benchmark repository holding ``configs``."""
    return {
        "name": "UOUO",
        "description": "Uncontextualized Uncommon Objects: 800x800 mosaics of four uncommon objects; "
                       "'where is the X' scored by mIoU and 'which quadrant' by accuracy.",
        "evaluation_framework": FRAMEWORK,
        "tasks": [{"id": task, "description": description, "config": dataset.removeprefix("uouo-"),
                   "split": DEFAULT_SPLIT}
                  for task, (description, dataset, _) in UOUO_TASKS.items() if dataset.removeprefix("uouo-") in configs],
    }


def write_eval_yaml(out: Path, content: dict[str, Any]) -> Path:
    import yaml

    path = Path(out) / EVAL_FILE
    path.write_text(yaml.safe_dump(content, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def eval_yaml_for(configs: Sequence[Any]) -> dict[str, Any] | None:
    """The ``eval.yaml`` of an exported repository from its configs' metadata (benchmark and
    config names); None when the configs carry no readable metadata or mix benchmarks."""
    from rf100vl_hf.metadata import read_metadata

    benchmarks = set()
    for config in configs:
        try:
            benchmarks.add(read_metadata(config.info()).get("benchmark"))
        except (ValueError, KeyError, TypeError):
            return None
    if benchmarks == {"rf100vl"}:
        return rf100vl_eval_yaml()
    if benchmarks == {"uouo"}:
        return uouo_eval_yaml([config.name for config in configs])
    return None


# ---------------------------------------------------------------- entries of a model


class EvalResultsError(Rf100vlError, ValueError):
    """Rows that cannot make evaluation results (several models, nothing covered...)."""


@dataclass(frozen=True)
class EvalFile:
    """One ``.eval_results/<name>.yaml``: its entries, and the tasks left out and why."""

    name: str
    entries: list[Any]  # huggingface_hub.EvalResultEntry
    skipped: dict[str, str]


def _model_rows(rows: Sequence[dict[str, Any]], model: str | None) -> list[dict[str, Any]]:
    specs = list(dict.fromkeys(str(row.get("spec") or row.get("model")) for row in rows))
    if model is None:
        if len(specs) > 1:
            raise EvalResultsError(f"the rows hold several models ({', '.join(specs)}): choose one with --model")
        return list(rows)
    chosen = [row for row in rows if model in (row.get("spec"), row.get("model"))]
    if not chosen:
        raise EvalResultsError(f"no rows of model {model!r}; models found: {', '.join(specs)}")
    return chosen


def _notes(prompt: str | None, split: str | None, extra: Sequence[str] = (), smoke: bool = False) -> str | None:
    parts = [*([SMOKE_NOTE] if smoke else []),
             *([f"prompt mode: {prompt}"] if prompt and prompt != DEFAULT_PROMPT else []),
             *([f"split: {split}"] if split and split != DEFAULT_SPLIT else []), *extra]
    return "; ".join(parts) or None


def _date(rows: Sequence[dict[str, Any]]) -> str | None:
    stamps = sorted(str(row["timestamp"]) for row in rows if row.get("timestamp"))
    return stamps[-1] if stamps else None


def eval_files(
    rows: Sequence[dict[str, Any]],
    benchmark: str,
    model: str | None = None,
    benchmark_revision: str | None = None,
    source_url: str | None = None,
    partial: bool = False,
) -> list[EvalFile]:
    """The evaluation results of one model's rows on the benchmark dataset ``benchmark``: one
    file per benchmark, prompt mode and split. A task whose datasets the rows do not all cover
    is left out (listed in ``skipped``), unless ``partial``: then its value is the mean over
    the datasets run, and the notes say how many of how many. Rows of limited runs (the first
    images of each split only) are never reported."""
    from huggingface_hub import EvalResultEntry

    from rf100vl_hf.results.rows import LIMIT, latest

    rows = [row for row in latest(_model_rows(rows, model)) if not row.get(LIMIT)]
    common = {"dataset_id": benchmark, "dataset_revision": benchmark_revision, "source_url": source_url,
              "source_name": "rf100vl-hf results" if source_url else None}
    files = []
    detection = [row for row in rows if row.get("benchmark") == "rf100vl"]
    for (prompt, split), chosen in _groups(detection).items():
        scores = {row["dataset"]: float(row["ap"]) for row in chosen if isinstance(row.get("ap"), (int, float))}
        entries, skipped = [], {}
        for task, (_, datasets) in rf100vl_tasks().items():
            covered = [scores[d] for d in datasets if d in scores]
            if not covered or (len(covered) < len(datasets) and not partial):
                skipped[task] = f"{len(covered)} of {len(datasets)} datasets scored"
                continue
            extra = [f"partial: {len(covered)} of {len(datasets)} datasets"] if len(covered) < len(datasets) else []
            smoke = any(row.get("smoke") for row in chosen if row["dataset"] in datasets)
            entries.append(EvalResultEntry(task_id=task, value=round(sum(covered) / len(covered), 2),
                                           date=_date(chosen), notes=_notes(prompt, split, extra, smoke), **common))
        files.append(EvalFile("_".join(["rf100vl", *_variant(prompt, split)]), entries, skipped))
    grounding = [row for row in rows if row.get("benchmark") == "uouo"]
    if grounding:
        by_dataset = {row["dataset"]: row for row in grounding}
        entries, skipped = [], {}
        for task, (_, dataset, key) in UOUO_TASKS.items():
            row = by_dataset.get(dataset)
            if row is None or not isinstance(row.get(key), (int, float)):
                skipped[task] = f"no {dataset} row"
                continue
            entries.append(EvalResultEntry(task_id=task, value=round(float(row[key]), 4), date=_date([row]),
                                           notes=_notes(None, row.get("split"), smoke=bool(row.get("smoke"))),
                                           **common))
        files.append(EvalFile("uouo", entries, skipped))
    return files


def _groups(rows: Sequence[dict[str, Any]]) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row.get("prompt"), row.get("split")), []).append(row)
    return groups


def _variant(prompt: str | None, split: str | None) -> list[str]:
    return [_slug(v) for v, default in ((prompt, DEFAULT_PROMPT), (split, DEFAULT_SPLIT)) if v and v != default]


def write_eval_files(files: Sequence[EvalFile], out: Path) -> list[Path]:
    """Write each file with entries as ``out/.eval_results/<name>.yaml``."""
    import yaml
    from huggingface_hub import eval_result_entries_to_yaml

    folder = Path(out) / EVAL_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for file in files:
        if file.entries:
            path = folder / f"{file.name}.yaml"
            path.write_text(yaml.safe_dump(eval_result_entries_to_yaml(file.entries), sort_keys=False), encoding="utf-8")
            paths.append(path)
    return paths


def push_eval_results(
    files: Sequence[EvalFile],
    model_repo: str,
    token: str | None = None,
    create_pr: bool = False,
    timeout: float | None = None,
) -> str:
    """Commit the files' YAML into ``model_repo`` (an existing model repository); return the
    commit URL, or the pull request's URL with ``create_pr``."""
    import tempfile

    from huggingface_hub import CommitOperationAdd, HfApi

    from rf100vl_hf.hub.network import bounded, xet_or_lfs
    from rf100vl_hf.hub.auth import check_token, refused_as_auth_error

    if not any(file.entries for file in files):
        skipped = "; ".join(f"{task}: {why}" for file in files for task, why in file.skipped.items())
        raise EvalResultsError(f"no task is covered by the rows ({skipped or 'no rows'}); --partial reports partial means")
    api = HfApi()
    with bounded(api.endpoint, f"pushing evaluation results to {model_repo}", timeout), \
            tempfile.TemporaryDirectory(prefix="rf100vl-eval-") as staging:
        token = check_token(api, token)
        paths = write_eval_files(files, Path(staging))
        operations = [CommitOperationAdd(f"{EVAL_FOLDER}/{p.name}", str(p)) for p in paths]
        with refused_as_auth_error(api, model_repo, "model"), xet_or_lfs(api.endpoint, model_repo, "model", token):
            info = api.create_commit(model_repo, operations, commit_message="Add evaluation results (rf100vl-hf)",
                                     token=token, repo_type="model", create_pr=create_pr)
    return info.pr_url if create_pr and info.pr_url else info.commit_url


def check_eval_file(path: Path) -> list[Any]:
    """Parse a ``.eval_results`` YAML file back with huggingface_hub's own parser."""
    import yaml
    from huggingface_hub import parse_eval_result_entries

    try:
        return parse_eval_result_entries(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    except (yaml.YAMLError, KeyError, TypeError) as exc:
        raise DataError(path, "entries", f"not evaluation results ({exc})") from None
