"""The Hub's specification of evaluation results, as data: the fields of a benchmark's
``eval.yaml`` and of a model's ``.eval_results/*.yaml`` entries, and the evaluation
framework ids the Hub accepts.

Read from, as of August 2026:

- hub-docs ``docs/hub/eval-results.md`` (commit b695d61, 2026-06-24): the ``eval.yaml``
  fields (``name``, ``description``, ``evaluation_framework``, ``tasks[]`` of ``id``,
  ``config``, ``split``; ``field_spec``, ``solvers`` and ``scorers`` for ``inspect-ai``);
- hub-docs ``eval_results.yaml`` (commit 2be4979, 2026-01-26): the entry fields;
- huggingface.js ``packages/tasks/src/eval.ts`` (commit c975bd4, 2026-08-17):
  ``EVALUATION_FRAMEWORKS``, the ids ``evaluation_framework`` may take;
- huggingface_hub 2.4 ``_eval_results.py``: ``EvalResultEntry``, which builds and parses
  entries but checks no field beyond "``source.url`` when any ``source`` field is set".

huggingface_hub has no validator of ``eval.yaml`` and checks little of an entry, so
:func:`eval_yaml_problems` and :func:`eval_result_problems` check a parsed file against the
tables below: unknown fields, missing required ones, wrong types, a ``date`` that is not a
quoted ISO-8601 date. The stand-in Hub of the tests validates uploads with the same
functions. :data:`FRAMEWORKS` ages: a framework registered after the date above is missing
from it, so an id it lacks is a warning here (:func:`framework_registered`), never an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

FRAMEWORKS: frozenset[str] = frozenset({
    "apex-evals", "archipelago", "benchflow", "claw-eval", "exgentic", "extractbench", "harbor", "ifstruct",
    "inspect-ai", "math-arena", "mdpbench", "mmmu", "mteb", "nanofold", "nemo-evaluator", "olmocr-bench",
    "open-asr-leaderboard", "parsebench", "pbench", "pier", "real5-omnidocbench", "redline-bench",
    "researchclawbench", "screenspot-pro", "swe-bench", "swe-bench-pro", "video-mme-v2", "wbench",
    "wildclawbench", "yc-bench",
})
"""``EVALUATION_FRAMEWORKS`` of huggingface.js as of 2026-08-17 (30 ids)."""

FRAMEWORKS_DATE = "2026-08-17"

_REPO_ID = re.compile(r"[\w.-]+/[\w.-]+")


@dataclass(frozen=True)
class Field:
    """One field of a mapping: required or not, what its value must be (``check`` returns what
    is wrong, or None), and the fields of a nested mapping or of each item of a list."""

    required: bool
    check: Callable[[Any], str | None]
    fields: Mapping[str, Field] | None = None
    each: bool = False  # a list whose items are mappings of ``fields``


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else "must be a non-empty string"


def _repo_id(value: Any) -> str | None:
    return None if isinstance(value, str) and _REPO_ID.fullmatch(value) else "must be a Hub id ORG/NAME"


def _number(value: Any) -> str | None:
    return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "must be a number"


def _iso_date(value: Any) -> str | None:
    if isinstance(value, (date, datetime)):
        return "must be a quoted string (unquoted, YAML reads it as a date)"
    if not isinstance(value, str):
        return "must be a quoted ISO-8601 date or datetime"
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return f"{value!r} is not an ISO-8601 date or datetime"
    return None


def _mapping(value: Any) -> str | None:
    return None if isinstance(value, dict) else "must be a mapping"


def _list(value: Any) -> str | None:
    return None if isinstance(value, list) and value else "must be a non-empty list"


TASK: dict[str, Field] = {
    "id": Field(True, _text),
    "config": Field(False, _text),  # defaults to the dataset's default config
    "split": Field(False, _text),  # defaults to "test"
}
"""An item of ``eval.yaml``'s ``tasks``."""

INSPECT_AI_TASK: dict[str, Field] = {
    **TASK,
    "field_spec": Field(True, _mapping),
    "solvers": Field(True, _list),
    "scorers": Field(True, _list),
}
"""A task of a benchmark whose framework is ``inspect-ai``, which needs these three too."""

EVAL_YAML: dict[str, Field] = {
    "name": Field(True, _text),
    "description": Field(True, _text),
    "evaluation_framework": Field(True, _text),
    "tasks": Field(True, _list, TASK, each=True),
}
"""``eval.yaml`` at the root of a benchmark dataset."""

EVAL_RESULT: dict[str, Field] = {
    "dataset": Field(True, _mapping, {
        "id": Field(True, _repo_id),
        "task_id": Field(True, _text),
        "revision": Field(False, _text),
    }),
    "value": Field(True, _number),
    "verifyToken": Field(False, _text),
    "date": Field(False, _iso_date),
    "source": Field(False, _mapping, {
        "url": Field(True, _text),
        "name": Field(False, _text),
        "user": Field(False, _text),
        "org": Field(False, _text),
    }),
    "notes": Field(False, _text),
}
"""One entry of a ``.eval_results/*.yaml`` list."""


def problems(value: Any, fields: Mapping[str, Field], where: str = "") -> list[str]:
    """What is wrong with the mapping ``value`` against ``fields``, one ``field: why`` each."""
    if not isinstance(value, dict):
        return [f"{where or 'the file'}: must be a mapping"]
    found = []
    for key in value:
        if key not in fields:
            found.append(f"{where}{key}: not a field of the specification (known: {', '.join(fields)})")
    for key, field in fields.items():
        path = f"{where}{key}"
        if key not in value:
            if field.required:
                found.append(f"{path}: missing (required)")
            continue
        why = field.check(value[key])
        if why:
            found.append(f"{path}: {why}")
        elif field.fields is not None and field.each:
            for index, item in enumerate(value[key]):
                found += problems(item, field.fields, f"{path}[{index}].")
        elif field.fields is not None:
            found += problems(value[key], field.fields, f"{path}.")
    return found


def eval_yaml_problems(data: Any) -> list[str]:
    """What is wrong with a parsed ``eval.yaml`` (an ``inspect-ai`` benchmark's tasks need its
    three extra fields); task ids must be unique."""
    inspect_ai = isinstance(data, dict) and data.get("evaluation_framework") == "inspect-ai"
    found = problems(data, {**EVAL_YAML, "tasks": Field(True, _list, INSPECT_AI_TASK, each=True)}
                     if inspect_ai else EVAL_YAML)
    if found:
        return found
    ids = [task.get("id") for task in data["tasks"]]
    found += [f"tasks: id {task!r} is given twice" for task in sorted({t for t in ids if ids.count(t) > 1})]
    return found


def eval_result_problems(data: Any) -> list[str]:
    """What is wrong with a parsed ``.eval_results/*.yaml`` file (a non-empty list of entries)."""
    if not isinstance(data, list) or not data:
        return ["the file: must be a non-empty list of entries"]
    return [problem for index, entry in enumerate(data) for problem in problems(entry, EVAL_RESULT, f"[{index}].")]


def framework_registered(framework: str) -> bool:
    """Whether ``framework`` was one of the Hub's evaluation frameworks on :data:`FRAMEWORKS_DATE`."""
    return framework in FRAMEWORKS


def task_resolution_problems(tasks: list[dict[str, Any]], configs: Mapping[str, set[str]], default: str | None
                             ) -> list[str]:
    """What keeps the Hub from finding each task's data: its ``config`` (or, when it names
    none, the repository's ``default`` config) must be one of ``configs`` (config -> splits)
    and its ``split`` (default ``test``) a split of it."""
    found = []
    for index, task in enumerate(tasks):
        config = task.get("config") or default
        where = f"tasks[{index}] ({task.get('id')})"
        if config is None:
            found.append(f"{where}: names no config and the repository has no default config "
                         f"(it has {len(configs)} config(s)): set tasks[{index}].config")
        elif config not in configs:
            found.append(f"{where}: config {config!r} is not a config of the repository")
        elif task.get("split", "test") not in configs[config]:
            found.append(f"{where}: split {task.get('split', 'test')!r} is not a split of config {config!r} "
                         f"(it has {', '.join(sorted(configs[config])) or 'none'})")
    return found
