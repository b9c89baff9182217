"""A benchmark's ``eval.yaml``: the tasks of RF100-VL and UOUO, written to the Hub's
specification (:mod:`.specification`) and checked against the repository before a push.

The specification gives each task one ``config`` and one ``split`` of the benchmark
dataset, and an RF100-VL repository has one config per dataset and no default one, so:

- every RF100-VL dataset is a task of its own (``id`` and ``config`` its name, ``split``
  ``test``): the AP50:95 (%) at maxDets 500 on its test split;
- the means of the paper are tasks too: ``all`` (the 100 datasets), ``rf20vl`` (the RF20-VL
  subset) and one per domain (``aerial``, ``document``, ``flora-fauna``, ``industrial``,
  ``medical``, ``sports``, ``other``). A mean covers many configs and a task may name one, so
  each names the first dataset it covers (in catalogue order), which the Hub can resolve;
  the value is the unweighted mean over all of them. A repository declares a mean only when
  it holds every dataset the mean covers;
- UOUO: ``random`` and ``mmd`` (mIoU), ``random-quadrant`` and ``mmd-quadrant`` (quadrant
  accuracy), each on the ``test`` split of its config.

The ``evaluation_framework`` is ``rf100vl-hf`` unless ``$RF100VL_EVAL_FRAMEWORK`` names
another. The Hub shows a benchmark's leaderboard only for ids in its list of frameworks,
which ``rf100vl-hf`` is not yet in (docs/publishing.md says how it gets there); a push warns
with :class:`UnregisteredFrameworkWarning` meanwhile.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf import catalog
from rf100vl_hf.errors import DataError
from rf100vl_hf.hub.specification import (
    FRAMEWORKS_DATE,
    eval_yaml_problems,
    framework_registered,
    task_resolution_problems,
)

EVAL_FILE = "eval.yaml"
FRAMEWORK_ENV = "RF100VL_EVAL_FRAMEWORK"
DEFAULT_FRAMEWORK = "rf100vl-hf"
SPLIT = "test"


class UnregisteredFrameworkWarning(UserWarning):
    """An ``eval.yaml`` names an evaluation framework that is not (yet) in the Hub's list."""


@dataclass(frozen=True)
class DetectionTask:
    """An RF100-VL task: the mean AP50:95 over ``datasets`` (one dataset for its own task)."""

    id: str
    datasets: tuple[str, ...]

    @property
    def config(self) -> str:
        return self.datasets[0]


@dataclass(frozen=True)
class GroundingTask:
    """A UOUO task: the row key ``key`` (``miou`` or ``accuracy``) of the results dataset ``dataset``."""

    id: str
    dataset: str
    key: str

    @property
    def config(self) -> str:
        return self.dataset.removeprefix("uouo-")


UOUO_TASKS: tuple[GroundingTask, ...] = (
    GroundingTask("random", "uouo-random", "miou"),
    GroundingTask("mmd", "uouo-mmd", "miou"),
    GroundingTask("random-quadrant", "uouo-random", "accuracy"),
    GroundingTask("mmd-quadrant", "uouo-mmd", "accuracy"),
)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def rf100vl_means() -> list[DetectionTask]:
    """The mean tasks: ``all``, ``rf20vl`` and one per domain, over catalogue datasets."""

    means = [DetectionTask("all", tuple(e.basename for e in catalog.select())),
             DetectionTask("rf20vl", tuple(e.basename for e in catalog.select(subset="rf20vl")))]
    return means + [DetectionTask(slug(domain), tuple(e.basename for e in catalog.select(domain=domain)))
                    for domain in catalog.DOMAINS]


def rf100vl_tasks(datasets: Sequence[str]) -> list[DetectionTask]:
    """The tasks a repository (or rows) of ``datasets`` can report: each mean whose datasets
    are all there, then one task per dataset (by name)."""
    present = set(datasets)
    means = [task for task in rf100vl_means() if set(task.datasets) <= present]
    taken = {task.id for task in means} & present
    if taken:
        raise DataError(", ".join(sorted(taken)), "config", "a dataset named like a mean task cannot be a task")
    return means + [DetectionTask(name, (name,)) for name in sorted(present)]


def evaluation_framework(framework: str | None = None) -> str:
    """``framework``, else ``$RF100VL_EVAL_FRAMEWORK``, else ``rf100vl-hf``."""
    chosen = framework or os.environ.get(FRAMEWORK_ENV) or DEFAULT_FRAMEWORK
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", chosen):
        raise DataError(f"${FRAMEWORK_ENV}" if not framework else "framework", "evaluation_framework",
                        f"{chosen!r} is not a framework id (lower-case letters, digits, '.', '_' and '-')")
    return chosen


def _task(task: DetectionTask | GroundingTask) -> dict[str, str]:
    return {"id": task.id, "config": task.config, "split": SPLIT}


def rf100vl_eval_yaml(configs: Sequence[str], framework: str | None = None) -> dict[str, Any]:
    """The ``eval.yaml`` of an RF100-VL repository holding the datasets ``configs``."""
    return {
        "name": "RF100-VL",
        "description": "Roboflow100-VL: 100 object-detection datasets in 7 domains, scored by pycocotools "
                       "AP50:95 (%) at maxDets 500 on each test split; the mean tasks average the datasets "
                       "they cover.",
        "evaluation_framework": evaluation_framework(framework),
        "tasks": [_task(task) for task in rf100vl_tasks(configs)],
    }


def uouo_eval_yaml(configs: Sequence[str] = ("random", "mmd"), framework: str | None = None) -> dict[str, Any]:
    """The ``eval.yaml`` of a UOUO repository holding ``configs``."""
    return {
        "name": "UOUO",
        "description": "Uncontextualized Uncommon Objects: 800x800 mosaics of four uncommon objects; "
                       "'where is the X' scored by mIoU and 'which quadrant' by accuracy.",
        "evaluation_framework": evaluation_framework(framework),
        "tasks": [_task(task) for task in UOUO_TASKS if task.config in configs],
    }


def eval_yaml_for(configs: Sequence[Any], framework: str | None = None) -> dict[str, Any] | None:
    """The ``eval.yaml`` of an exported repository from its configs' metadata (benchmark and
    config names); None when the configs carry no readable metadata or mix benchmarks."""
    from rf100vl_hf.metadata import read_metadata

    benchmarks = set()
    for config in configs:
        try:
            benchmarks.add(read_metadata(config.info()).get("benchmark"))
        except (ValueError, KeyError, TypeError):
            return None
    names = [config.name for config in configs]
    if benchmarks == {"rf100vl"}:
        return rf100vl_eval_yaml(names, framework)
    if benchmarks == {"uouo"}:
        return uouo_eval_yaml(names, framework)
    return None


def write_eval_yaml(out: Path, content: dict[str, Any]) -> Path:
    import yaml

    path = Path(out) / EVAL_FILE
    path.write_text(yaml.safe_dump(content, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def read_eval_yaml(text: str, where: str) -> dict[str, Any]:
    """A benchmark's ``eval.yaml`` parsed and checked against the specification; a file that
    does not parse or breaks it is a :class:`DataError` naming ``where`` and the fields."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(where, "eval.yaml", f"not YAML ({str(exc).splitlines()[0]})") from None
    found = eval_yaml_problems(data)
    if found:
        raise DataError(where, "eval.yaml", "breaks the Hub's specification: " + "; ".join(found[:5])
                        + (f" (and {len(found) - 5} more)" if len(found) > 5 else ""))
    return data


def warn_if_unregistered(data: Mapping[str, Any], where: str) -> bool:
    """Warn (:class:`UnregisteredFrameworkWarning`) when the file's framework is not in the
    Hub's list; whether it is."""
    framework = data["evaluation_framework"]
    if framework_registered(framework):
        return True
    warnings.warn(f"{where}: evaluation_framework {framework!r} is not one of the Hub's evaluation frameworks "
                  f"(as of {FRAMEWORKS_DATE}): until it is registered, the Hub shows no leaderboard for this "
                  "benchmark and no scores on it (docs/publishing.md, 'Registering the framework')",
                  UnregisteredFrameworkWarning, stacklevel=3)
    return False


def check_eval_yaml(folder: Path, configs: Mapping[str, set[str]], default: str | None = None) -> dict[str, Any]:
    """The ``eval.yaml`` of a repository folder, checked as the Hub checks it at push time: to
    the specification, and every task's config and split found among ``configs`` (config ->
    splits; ``default``: the config a task naming none means). Warns when its framework is not
    registered."""
    path = Path(folder) / EVAL_FILE
    data = read_eval_yaml(path.read_text(encoding="utf-8"), str(path))
    unresolved = task_resolution_problems(data["tasks"], configs, default)
    if unresolved:
        raise DataError(path, "tasks", "; ".join(unresolved[:5])
                        + (f" (and {len(unresolved) - 5} more)" if len(unresolved) > 5 else ""))
    warn_if_unregistered(data, str(path))
    return data
