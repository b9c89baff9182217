"""A model's evaluation results for the Hub: ``.eval_results/*.yaml`` entries built from
results rows with huggingface_hub's own ``EvalResultEntry``, from results only.

The Hub shows these entries on the model page and ranks them on the benchmark's leaderboard
(the tasks are those of :mod:`.eval_yaml`). So a value is written only when it is the
model's result on the task:

- rows that are not results are refused: smoke rows (random weights: the score means
  nothing), rows of a limited run (``--rf100vl-limit N``: the first N images of each split),
  rows scored under another protocol than the paper's (``--rf100vl-protocol rf-scripts``:
  another metric, ranked on the benchmark's leaderboard they would sit beside the paper
  protocol's scores) and, with ``partial``, means over part of a task's datasets.
  ``allow_unofficial`` writes them, with ``notes`` saying what they are
  (``--option allow-unofficial=true``), and a file of their own per protocol;
- the rows must have measured the checkpoint of the model repository they go to
  (:func:`check_model_repo`, which a push runs; ``--option model-repo-mismatch-ok=true`` overrides);
- a task whose datasets the rows do not all cover is left out (listed in ``skipped``).

Each entry has the task's value, the date of the latest row it comes from (an ISO-8601
string, quoted in the YAML), the source and notes naming a prompt mode, split or
fine-tuning that is not the default. The benchmark's revision and the source's user or org
are filled in when pushing (:mod:`.eval_publish`). Every file written is checked with
huggingface_hub's parser and against the specification (:mod:`.specification`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import DataError, Rf100vlError
from rf100vl_hf.hub.eval_yaml import UOUO_TASKS, rf100vl_means, slug
from rf100vl_hf.hub.specification import eval_result_problems
from rf100vl_hf.protocols import PAPER, PROTOCOLS
from rf100vl_hf.results.rows import latest
from rf100vl_hf.results.schema import AnyRow, ResultRow, TrainingColumns, as_rows, identity_of

EVAL_FOLDER = ".eval_results"
DEFAULT_PROMPT = "names"
DEFAULT_SPLIT = "test"
ALLOW_UNOFFICIAL = "--option allow-unofficial=true"
MISMATCH_OK = "--option model-repo-mismatch-ok=true"
SMOKE_NOTE = "smoke run: random weights, the score means nothing"
"""In the notes of an entry computed from a smoke row (random weights, or a replay of them)."""


class EvalResultsError(Rf100vlError, ValueError):
    """Rows that cannot make evaluation results (several models, nothing covered...)."""


class UnofficialResultsError(EvalResultsError):
    """Rows that are not results of the benchmark (smoke, limited, another protocol, partial means)."""


class ModelRepoMismatchError(EvalResultsError):
    """Rows that did not measure the checkpoint of the model repository they would go to."""


@dataclass(frozen=True)
class EvalFile:
    """One ``.eval_results/<name>.yaml``: its entries, and the tasks left out and why."""

    name: str
    entries: list[Any]  # huggingface_hub.EvalResultEntry
    skipped: dict[str, str]
    model: str  # the spec of the rows
    checkpoints: tuple[str | None, ...]  # what the rows measured

    @property
    def path(self) -> str:
        return f"{EVAL_FOLDER}/{self.name}.yaml"


def model_rows(rows: Sequence[ResultRow], model: str | None) -> list[ResultRow]:
    """The rows of ``model`` (a spec or an adapter name); all rows when they hold one model."""
    specs = list(dict.fromkeys(row.spec for row in rows))
    if model is None:
        if len(specs) > 1:
            raise EvalResultsError(f"the rows hold several models ({', '.join(specs)}): choose one with --model")
        return list(rows)
    chosen = [row for row in rows if model in (row.model.spec, row.model.model)]
    if not chosen:
        raise EvalResultsError(f"no rows of model {model!r}; models found: {', '.join(specs)}")
    return chosen


def check_model_repo(files: Sequence[EvalFile], model_repo: str, mismatch_ok: bool = False) -> None:
    """Refuse files of rows whose checkpoint is not ``model_repo`` (Hub ids compare without
    case): their scores are another model's, or a local copy's."""
    other = sorted({str(checkpoint or "(none recorded)") for file in files if file.entries
                    for checkpoint in file.checkpoints if str(checkpoint or "").casefold() != model_repo.casefold()})
    if other and not mismatch_ok:
        spec = next(file.model for file in files)
        raise ModelRepoMismatchError(
            f"the rows of {spec} measured checkpoint {', '.join(other)}, not {model_repo}: their scores are not "
            f"{model_repo}'s; push them to the repository of that checkpoint, or give {MISMATCH_OK} if "
            f"{model_repo} holds what they measured")


def _protocol_notes(row: ResultRow) -> list[str]:
    """The note of a row scored under another protocol than the paper's (none for the paper's)."""
    name = row.protocol
    if name == PAPER:
        return []
    known = PROTOCOLS.get(name)
    return [f"protocol {name}, not the paper's" + (f": {known.description}" if known else "")]


def _unofficial(row: ResultRow) -> list[str]:
    """What makes a row not a result of the benchmark, as notes."""

    return ([SMOKE_NOTE] if row.model.smoke else []) + (
        [f"limited run: the first {row.data.limit} images of each split"] if row.data.limit else []
    ) + _protocol_notes(row)


def _training(row: ResultRow) -> tuple[str, ...]:
    """How the row's model was fine-tuned, as the text of its training identity (``None`` s zero-shot)."""
    return tuple(str(value) for value in identity_of(row.training or TrainingColumns()).values())


def _without_superseded_limits(rows: list[ResultRow]) -> list[ResultRow]:
    """Rows, less the limited rows of a (dataset, prompt, split, training) a full row covers."""

    def where(row: ResultRow) -> tuple[Any, ...]:
        return (row.data.dataset, row.data.prompt, row.data.split, row.protocol, *_training(row))

    full = {where(row) for row in rows if not row.data.limit}
    return [row for row in rows if not row.data.limit or where(row) not in full]


def refuse_unofficial(rows: Sequence[ResultRow], partial_tasks: Sequence[str]) -> None:
    """Raise :class:`UnofficialResultsError` saying which of the rows used are not results and
    why (``partial_tasks``: the tasks given a mean over part of their datasets)."""

    smoke = sorted({row.data.dataset for row in rows if row.model.smoke})
    limited = sorted({row.data.dataset for row in rows if row.data.limit})
    other = sorted({row.protocol for row in rows} - {PAPER})
    reasons = []
    if smoke:
        reasons.append(f"{len(smoke)} smoke row(s) (random weights: the score means nothing) on {_few(smoke)}")
    if limited:
        reasons.append(f"{len(limited)} row(s) of a limited run (--rf100vl-limit: the first images of each split "
                       f"only) on {_few(limited)}")
    if other:
        reasons.append(f"rows scored under the protocol(s) {', '.join(other)}, not the paper's (--rf100vl-protocol)")
    if partial_tasks:
        reasons.append(f"partial means over part of the datasets of {_few(list(partial_tasks))}")
    if reasons:
        raise UnofficialResultsError(
            f"not results of the benchmark: {'; '.join(reasons)}. Published, they would rank on its leaderboard as "
            f"the model's scores; {ALLOW_UNOFFICIAL} writes them with notes saying what they are")


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _notes(rows: Sequence[ResultRow], extra: Sequence[str] = ()) -> str | None:
    first = rows[0]
    parts = [*dict.fromkeys(note for row in rows for note in _unofficial(row)), *extra]
    if first.data.prompt and first.data.prompt != DEFAULT_PROMPT:
        parts.append(f"prompt mode: {first.data.prompt}")
    if first.data.split and first.data.split != DEFAULT_SPLIT:
        parts.append(f"split: {first.data.split}")
    training = first.training
    if training is not None and training.recipe:
        parts.append(f"fine-tuned on the {training.train_split} split with recipe {training.recipe}"
                     + (f", seed {training.seed}" if training.seed is not None else ""))
    return "; ".join(parts) or None


def _date(rows: Sequence[ResultRow]) -> str | None:
    """The latest timestamp of the rows, as the ISO-8601 text they hold (None if none reads)."""
    stamps = []
    for row in rows:
        text = str(row.run.timestamp)
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            continue
        stamps.append((when if when.tzinfo else when.replace(tzinfo=timezone.utc), text))
    return max(stamps)[1] if stamps else None


def _one_per_dataset(rows: Sequence[ResultRow]) -> dict[str, ResultRow]:
    """The group's rows by dataset; two measurements of one dataset (another revision,
    options, dtype, training...) cannot make one score."""

    by_dataset: dict[str, ResultRow] = {}
    for row in rows:
        other = by_dataset.setdefault(row.data.dataset, row)
        if other is not row:
            mine, theirs = row.identity(), other.identity()
            differ = [key for key in mine if mine[key] != theirs[key]]
            raise EvalResultsError(f"the rows hold two measurements of {row.model.spec} on {row.data.dataset} "
                                   f"(they differ in {', '.join(differ)}): choose one run with --run RUN_ID or --run latest")
    return by_dataset


def eval_files(
    rows: Sequence[AnyRow],
    benchmark: str,
    model: str | None = None,
    benchmark_revision: str | None = None,
    source_url: str | None = None,
    partial: bool = False,
    allow_unofficial: bool = False,
) -> list[EvalFile]:
    """The evaluation results of one model's rows on the benchmark dataset ``benchmark``: one
    file per benchmark, prompt mode, split, protocol and fine-tuning. A mean task whose datasets the
    rows do not all cover is left out (listed in ``skipped``), unless ``partial``: then its
    value is the mean over the datasets run, and the notes say how many of how many. Rows
    that are not results are refused unless ``allow_unofficial`` (see the module)."""
    from huggingface_hub import EvalResultEntry


    rows = _without_superseded_limits(latest(model_rows(as_rows(rows), model)))
    spec = rows[0].spec if rows else str(model)
    common = {"dataset_id": benchmark, "dataset_revision": benchmark_revision, "source_url": source_url,
              "source_name": "rf100vl-hf results" if source_url else None}
    files, used, partial_tasks = [], [], []
    detection = [row for row in rows if row.data.benchmark == "rf100vl"]
    groups: dict[tuple[Any, ...], list[ResultRow]] = {}
    for row in detection:
        groups.setdefault((row.data.prompt, row.data.split, row.protocol, *_training(row)), []).append(row)
    for chosen in groups.values():
        scored = {name: row for name, row in _one_per_dataset(chosen).items() if isinstance(row.scores.ap, (int, float))}
        entries, skipped = [], {}
        for task in rf100vl_means():
            covered = [scored[d] for d in task.datasets if d in scored]
            if not covered or (len(covered) < len(task.datasets) and not partial):
                skipped[task.id] = f"{len(covered)} of {len(task.datasets)} datasets scored"
                continue
            extra = []
            if len(covered) < len(task.datasets):
                extra.append(f"partial: {len(covered)} of {len(task.datasets)} datasets")
                partial_tasks.append(task.id)
            entries.append(EvalResultEntry(task_id=task.id, value=round(sum(r.scores.ap for r in covered) / len(covered), 2),
                                           date=_date(covered), notes=_notes(covered, extra), **common))
        used += scored.values()
        for name in sorted(scored):
            row = scored[name]
            entries.append(EvalResultEntry(task_id=name, value=round(float(row.scores.ap), 2), date=_date([row]),
                                           notes=_notes([row]), **common))
        files.append(EvalFile("_".join(["rf100vl", *_variant(chosen[0])]), entries, skipped, spec,
                              _checkpoints(scored.values())))
    grounding = [row for row in rows if row.data.benchmark == "uouo"]
    if grounding:
        by_dataset = _one_per_dataset(grounding)
        entries, skipped = [], {}
        for task in UOUO_TASKS:
            found = by_dataset.get(task.dataset)
            value = None if found is None else getattr(found.scores, task.key)
            if found is None or not isinstance(value, (int, float)):
                skipped[task.id] = f"no {task.dataset} row"
                continue
            row = found
            used.append(row)
            entries.append(EvalResultEntry(task_id=task.id, value=round(float(value), 4), date=_date([row]),
                                           notes=_notes([row]), **common))
        files.append(EvalFile("uouo", entries, skipped, spec, _checkpoints(by_dataset.values())))
    if not allow_unofficial:
        refuse_unofficial(used, partial_tasks)
    return files


def _checkpoints(rows: Iterable[ResultRow]) -> tuple[str | None, ...]:
    return tuple(dict.fromkeys(row.model.checkpoint for row in rows))


def _variant(row: ResultRow) -> list[str]:
    parts = [slug(str(v)) for v, default in ((row.data.prompt, DEFAULT_PROMPT), (row.data.split, DEFAULT_SPLIT),
                                             (row.protocol, PAPER)) if v and v != default]
    training = row.training
    if training is not None and training.recipe:
        parts += [slug(f"{training.train_split}-{training.recipe}")] + \
            ([f"seed{training.seed}"] if training.seed is not None else [])
    return parts


def eval_yaml_text(file: EvalFile) -> str:
    """The file's YAML, checked: huggingface_hub parses it back, and it meets the specification."""
    import yaml
    from huggingface_hub import eval_result_entries_to_yaml

    text = yaml.safe_dump(eval_result_entries_to_yaml(file.entries), sort_keys=False, allow_unicode=True)
    check_eval_text(text, file.path)
    return text


def write_eval_files(files: Sequence[EvalFile], out: Path) -> list[Path]:
    """Write each file with entries as ``out/.eval_results/<name>.yaml``."""
    paths = []
    for file in files:
        if file.entries:
            path = Path(out) / file.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(eval_yaml_text(file), encoding="utf-8")
            paths.append(path)
    return paths


def check_eval_text(text: str, where: str) -> list[Any]:
    """Parse ``.eval_results`` YAML with huggingface_hub's own parser, after checking it
    against the specification; a :class:`DataError` names ``where`` and the fields at fault."""
    import yaml
    from huggingface_hub import parse_eval_result_entries

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(where, "entries", f"not YAML ({str(exc).splitlines()[0]})") from None
    found = eval_result_problems(data)
    if found:
        raise DataError(where, "entries", "breaks the Hub's specification: " + "; ".join(found[:5])
                        + (f" (and {len(found) - 5} more)" if len(found) > 5 else ""))
    try:
        return parse_eval_result_entries(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(where, "entries", f"not evaluation results ({exc})") from None


def check_eval_file(path: Path) -> list[Any]:
    """A ``.eval_results`` file read back and checked (see :func:`check_eval_text`)."""
    return check_eval_text(Path(path).read_text(encoding="utf-8"), str(path))
