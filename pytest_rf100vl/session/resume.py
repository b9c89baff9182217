"""Resume by default: a pair whose finished row is already in the results folder is reused,
not run again (``--rf100vl-rerun`` runs it anyway).

A row is reused when it has the *identity* of the row the pair would write
(:data:`rf100vl_hf.results.schema.IDENTITY`: model, checkpoint, model revision, adapter
options, dataset, dataset fingerprint, split, prompt, split parameters, how the model was
fine-tuned, scoring version, ``--rf100vl-limit``, ``--rf100vl-protocol``: a row written before
protocols is the paper's),
the same dtype, and no image the model failed on (those are asked again; the answer cache
keeps the rest); under the report key ``log-samples``, a row of a model that answers in text must
name its samples log too (a row without one runs again, answered from the answer cache). The
identity is worked out without building the model:

- the model's columns from its registry entry (``Entry.planned``: the
  :class:`~pytest_rf100vl.adapters.base.ModelInfo` the model will record): its
  name, the checkpoint (or its default), the options with their defaults, and the revision
  the checkpoint has on disk now (:meth:`Adapter.pair_revision`: a Hub checkpoint's commit
  read from the local Hub cache, a local folder's content hash, a replayed file's content
  hash); a revision that cannot be known before the model is built never matches a recorded
  one, so such pairs run again;
- the dataset's columns from its kind's :meth:`BenchmarkKind.identify` (RF100-VL: the build
  whose exports' files are unchanged by ``stat``, read from its info), so that deciding that a
  pair is finished opens no Arrow file, decodes no image and builds no model; a kind that cannot
  say without loading gives them from the split it loads (:attr:`Split.identity`); the training
  columns from the pair's training plan.

A reused row is not written to ``results.jsonl`` again: that file holds each measurement once,
the row of the run that measured it, so a rerun that reuses every pair adds nothing to it and
reading the folder back (``rf100vl-hf results summary``) gives what it gave before. The row is
this session's all the same: it is checked against this session's thresholds, told to
``pytest_rf100vl_row_written``, and written to this session's ``results.parquet`` and
``summary.md`` under this run's id, ``reused_from`` naming the run that measured it.

Adapters made by a ``pytest_rf100vl_make_adapter`` hook have no entry the plugin can ask
before building them: their rows are matched by spec, options as given and the dataset's
columns (pass ``--rf100vl-rerun`` after changing such an adapter).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rf100vl_hf.results.folder import JSONL
from rf100vl_hf.results.rows import TornLineWarning, read_jsonl
from rf100vl_hf.results.schema import SCORING_VERSION, ResultRow, identity_of

from pytest_rf100vl.core.pairs import row_key
from pytest_rf100vl.engine.columns import model_identity as identified
from pytest_rf100vl.engine.columns import options_column
from pytest_rf100vl.session.training import identity_columns

if TYPE_CHECKING:
    from rf100vl_hf.specs import ModelSpec

    from pytest_rf100vl.adapters.base import Entry
    from pytest_rf100vl.core.config import RunConfig
    from pytest_rf100vl.core.matrix_view import MatrixView
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.kinds.base import Split, SplitIdentity


def earlier_rows(folder: Path) -> list[ResultRow]:
    """Every row of the folder's ``results.jsonl`` (none when there is no such file). A last
    line cut short by a killed run is skipped silently: its pair simply runs again."""
    path = Path(folder) / JSONL
    if not path.is_file():
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        return read_jsonl(path)


def model_identity(spec: "ModelSpec", entry: "Entry | None", dataset: str, split: str,
                   dtype: str) -> dict[str, Any]:
    """The model's identity columns for ``spec`` on ``dataset``'s ``split`` in ``dtype``, worked
    out without building the model; for a model whose entry cannot say (``entry`` ``None``: a
    hook makes it), the spec and the options as given."""
    options = spec.option_values
    if entry is None or entry.planned is None:
        return {"spec": spec.text, "requested_options": options_column(options), "dtype": dtype}
    return identity_of(identified(entry.planned(spec.checkpoint, options, dataset, split), dtype))


def _matches(row: ResultRow, wanted: dict[str, Any]) -> bool:
    identity = row.identity()
    return all((identity[key] if key in identity else row.column(key)) == value for key, value in wanted.items())


class EarlierRows:
    """The rows of a results folder by dataset and split, so that finding a pair's row reads
    the rows of its dataset only, however many pairs and runs the folder holds."""

    def __init__(self, rows: Sequence[ResultRow]):
        self.rows = list(rows)
        self._by_split: dict[tuple[Any, Any], list[ResultRow]] = {}
        for row in self.rows:
            self._by_split.setdefault((row.data.dataset, row.data.split), []).append(row)

    def of(self, dataset: str, split: str) -> list[ResultRow]:
        return self._by_split.get((dataset, split), [])


def reusable_row(rows: Sequence[ResultRow], wanted: dict[str, Any], samples: bool = False) -> ResultRow | None:
    """The latest row with the ``wanted`` column values whose model failed on no image (with
    ``samples``, that names its samples log), or ``None``."""
    candidates = [
        row for row in rows
        if _matches(row, wanted) and not row.output.failed_images and (row.output.samples_file or not samples)
    ]  # the newest wins; of two as new, the one written last
    return max(reversed(candidates), key=lambda row: str(row.run.timestamp)) if candidates else None


def planned(pair: "Pair", entry: "Entry | None", split: "Split | SplitIdentity", trains: bool,
            config: "RunConfig") -> dict[str, Any]:
    """The column values a reusable row of ``pair`` must have (``split``: what identifies the
    split it runs on; ``trains``: its kind's rows carry the training columns)."""
    training = identity_of(identity_columns(pair.training, split)) if trains else {}
    return {**model_identity(pair.spec, entry, pair.dataset, split.name, config.loop.dtype), "dataset": pair.dataset,
            "split": split.name, **split.identity, **training, "scoring_version": SCORING_VERSION,
            "limit": config.matrix.limit}  # a full run wants None: a limited row is never reused for it


def reused_row(row: ResultRow, pair: "Pair", run_id: str) -> ResultRow:
    """A copy of an earlier run's ``row`` as this run's row of ``pair`` (in this session's
    ``results.parquet`` and ``summary.md``, not in ``results.jsonl``, which holds the row it
    copies): it keeps the scores, throughput and timestamp of the run that measured them, and
    ``reused_from`` names that run."""
    return replace(row, run=replace(row.run, run_id=run_id, reused_from=row.run.reused_from or row.run.run_id),
                   model=replace(row.model, spec=pair.spec.text))


def unfinished(items: Sequence["Pair"], state: "MatrixView", rows: Sequence[ResultRow]) -> list[str]:
    """Ids of the pairs this session was to run (``items``) that have no row in ``rows`` (the run's) and were not skipped or refused for a reason the
    summary gives, in matrix order: what an interrupted session did not do. It goes by rows,
    so an xdist controller, which runs no pair itself, counts its workers' pairs as finished."""
    finished = {row_key(row) for row in rows}
    accounted = set(state.errors) | set(state.left_out)
    left = {pair.id for pair in items
            if pair.id not in accounted and pair.dataset not in state.missing
            and pair.key not in finished}
    order = {pair.id: index for index, pair in enumerate(state.pairs)}
    return sorted(left, key=lambda pair_id: order.get(pair_id, len(order)))


def interruption(unfinished_ids: Sequence[str], interrupted: bool) -> str:
    """The summary's section on pairs that did not finish ('' when every pair did)."""
    if not unfinished_ids:
        return ""
    how = "was interrupted" if interrupted else "stopped"
    return "\n".join([
        "", "## Interrupted", "",
        f"This run {how} before {len(unfinished_ids)} pair(s) finished; run the same command again to resume "
        "(finished pairs are reused, answered images come from the answer cache):", "",
        *[f"- {pair_id}" for pair_id in unfinished_ids], "",
    ])
