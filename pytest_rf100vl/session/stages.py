"""One pair, stage by stage: fit (when it has a training plan) -> infer -> score -> row ->
check. The same for every benchmark kind: the kind loads the split and scores the answers;
the inference loop answers; everything else is here.

- **fit**: the training stage (:mod:`.training`) fits the model on the plan's split, or loads
  the weights an earlier fit left in the results folder;
- **infer**: the model is told the split's task, then answers every image (the scoring
  round, with its timing rounds, :func:`pytest_rf100vl.engine.runner.answer`);
- **score**: the kind scores the answers, and what the model answered is written beside the
  results (``predictions/<model>/<dataset>/<split>[.first<N>][.trained-<key>].json[l]``);
- **row**: the row's sections (:mod:`rf100vl_hf.results.schema`) from each stage;
- **check**: each metric's minimum (the thresholds file's most specific rule, else the kind's
  ``--KIND-min-METRIC``), and too many failed images.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from rf100vl_hf.results.folder import SAMPLES_SUFFIX
from rf100vl_hf.results.schema import CheckColumns, DataColumns, ResultRow, RunColumns

from pytest_rf100vl.core.minimums import ANY_TARGET, Metric, Threshold, check_status, failure, threshold_for
from pytest_rf100vl.core.pairs import Pair
from pytest_rf100vl.engine.columns import (
    model_columns,
    output_columns,
    provenance_columns,
    throughput_columns,
)
from pytest_rf100vl.engine.guard import adapter_call
from pytest_rf100vl.engine.runner import Answers, answer
from pytest_rf100vl.kinds.base import BenchmarkKind, Scored, Split
from pytest_rf100vl.session.training import Fitted, fit_columns, fit_or_load, store_for, training_key

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.model import Model
    from pytest_rf100vl.core.matrix_view import MatrixView


@dataclass
class PairRun:
    """A finished pair: its results row, its scores (``None`` for a pair reused from an earlier
    run: the row holds them), the model's answers, each metric's minimum and the failure
    message when it is below one."""

    pair: Pair
    row: ResultRow
    scored: Scored | None = None
    answers: Answers | None = None
    thresholds: dict[str, Threshold] = field(default_factory=dict)
    failure: str | None = None

    @property
    def scores(self) -> Any:
        """The kind's own scores (COCO scores for RF100-VL, grounding scores for UOUO)."""
        return None if self.scored is None else self.scored.result


def thresholds(pair: Pair, kind: BenchmarkKind, session: "MatrixView") -> dict[str, Threshold]:
    """Each metric's minimum for ``pair`` from the thresholds file: its dataset's row, else a
    row for every dataset (target ``*``); metrics with neither are left out."""
    found = {}
    for metric in kind.metrics:
        threshold = (threshold_for(session.rules, pair.spec, pair.dataset, metric.name)
                     or threshold_for(session.rules, pair.spec, ANY_TARGET, metric.name))
        if threshold is not None:
            found[metric.name] = threshold
    return found


def checked(pair: Pair, metrics: tuple[Metric, ...], values: dict[str, Any],
            found: dict[str, Threshold]) -> tuple[CheckColumns, str | None]:
    """The row's check section, and the failure message of values below their minimums."""
    by_name = {metric.name: metric for metric in metrics}
    messages = [failure(f"{pair.spec} on {pair.dataset}", by_name[name], values.get(name), threshold)
                for name, threshold in found.items()]
    columns = CheckColumns(
        minimums={metric.name: found[metric.name].minimum if metric.name in found else None for metric in metrics},
        threshold_source="; ".join(dict.fromkeys(t.source for t in found.values())) or None,
        check=check_status([(values.get(name), t) for name, t in found.items()]),
    )
    return columns, "; ".join(m for m in messages if m) or None


def fit(pair: Pair, model: "Model", split: Split, session: "MatrixView") -> Fitted | None:
    """The training stage: the pair's model fitted, or its earlier fit loaded (``None`` without a plan)."""
    if pair.training is None:
        return None
    key = training_key(model.info, split, pair.training, model.entry.training_libraries)
    store = store_for(session.config.report.results, pair.spec, pair.dataset, key)
    return fit_or_load(model, pair.training, store, split)


def output_name(split: Split, limit: int | None, fitted: Fitted | None) -> str:
    """The stem of a pair's predictions file: the split, with the limit when there is one (a
    quick run never overwrites what a full run's row points at) and the trained weights' store."""
    name = split.name if limit is None else f"{split.name}.first{limit}"
    return name if fitted is None else f"{name}.trained-{fitted.store.folder.name[:12]}"


def run_pair(pair: Pair, model: "Model", split: Split, session: "MatrixView", benchmark: Any = None) -> PairRun:
    """Run ``pair`` stage by stage (see the module docstring)."""
    kind = session.kinds[pair.kind]
    config = session.config
    fitted = fit(pair, model, split, session)
    task = split.task_for(model.entry, trained=fitted is not None)
    if task is not None:
        with adapter_call("the adapter's set_task"):
            model.set_task(task)
    asked = replace(split.first(config.matrix.limit), task=task)
    answers = answer(model, asked.images, asked.questions, config.loop.batch_size, session.loop,
                     f"{model.name} on {pair.dataset}", benchmark, (split.id_column, split.name_column))
    scored = kind.score(answers, asked)
    described = model.describe()
    stem = output_name(split, config.matrix.limit, fitted)
    writer = session.writer
    if scored.predictions is not None:
        path = (writer.write_predictions(pair.spec, pair.dataset, stem, scored.predictions, described)
                if scored.format == "json" else writer.write_records(pair.spec, pair.dataset, stem, scored.predictions))
        if hasattr(scored.columns, "predictions_file"):
            scored.columns.predictions_file = str(path)
    for column, (suffix, text) in scored.files.items():
        setattr(scored.errors, column, str(writer.write_file(pair.spec, pair.dataset, f"{stem}{suffix}", text)))
    output = output_columns(answers)
    if answers.samples is not None:
        output.samples_file = str(writer.write_records(pair.spec, pair.dataset, stem, answers.samples, SAMPLES_SUFFIX))
    found = thresholds(pair, kind, session)
    check, message = checked(pair, kind.metrics, scored.values, found)
    check.unscored = scored.unscored or (None if answers.n_images else "the split has no images")
    row = ResultRow(
        run=RunColumns(session.writer.run_id, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       session.command),
        model=model_columns(model.info, described, pair.spec, config.loop.batch_size,
                            answers.timing, split.smoke),
        data=DataColumns(kind.name, pair.dataset, split=split.name, limit=config.matrix.limit,
                         n_images=answers.n_images, **split.identity),
        scores=scored.columns if scored.columns is not None else dict(scored.values), errors=scored.errors,
        data_extra=split.extra, check=check, throughput=throughput_columns(answers), output=output,
        training=fit_columns(pair.training, split, fitted) if kind.trains else None,
        provenance=provenance_columns(), adapter=model.pair_columns(),
    )
    return PairRun(pair, row, scored, answers, found, message)
