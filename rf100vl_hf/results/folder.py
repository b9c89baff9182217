"""The results folder of a run (what each file holds: the README's "What a run leaves").

- ``results.jsonl``: one line per pair, appended (and flushed to disk) as each pair
  finishes, so an interrupted run loses nothing it computed. The file accumulates across
  runs; ``run_id`` tells them apart and ``benchmark`` names the row's kind. It holds each
  measurement once: a pair a later run reuses adds no line (that run's ``results.parquet``
  and ``summary.md`` hold its row, ``reused_from`` naming the run that measured it).
- ``results.parquet`` and ``summary.md``: this run's rows and tables, written when the
  session ends (a column a row lacks is null in the parquet file).
- ``predictions/<model>/<dataset>/``: what each pair answered, in its kind's format
  (``<split>.json``: COCO results, or ``<split>.jsonl``: one record per image), and with
  the report key ``log-samples`` the samples log of a model that answers in text
  (``<split>.samples.jsonl``: one line per image, what it was sent and wrote); a detection
  pair's confusion matrix, labelled with class names (``<split>.confusion.csv``,
  ``docs/errors.md``).

Every byte written here passes the session's scrubber first (:mod:`rf100vl_hf.redact`): no
file of the folder shows a key or a URL's credentials, whatever a row, an error or a server
put in it.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rf100vl_hf.redact import scrub, scrubbed
from rf100vl_hf.results.schema import ResultRow, arrow_schema, plain_arrow_types
from rf100vl_hf.specs import ModelSpec

JSONL = "results.jsonl"
PARQUET = "results.parquet"
SUMMARY = "summary.md"
PREDICTIONS = "predictions"
SAMPLES_SUFFIX = ".samples.jsonl"
"""The samples log of a pair beside its predictions: ``<split>.samples.jsonl``."""


def model_folder(spec: str, max_length: int = 64) -> str:
    """A folder name for a model spec: checkpoints may hold ``/`` and ``:``, and paths can be
    longer than a file name may be (a long one keeps its end and gets a hash of the whole)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_.") or "model"
    if len(slug) <= max_length:
        return slug
    digest = hashlib.sha1(spec.encode("utf-8")).hexdigest()[:10]
    return f"{slug[-(max_length - 11):].lstrip('_.')}-{digest}"


class ResultsWriter:
    """Writes a run's files into one folder; safe to use from the first pair to the last."""

    def __init__(self, folder: Path, run_id: str):
        self.folder = Path(folder)
        self.run_id = run_id

    @property
    def jsonl(self) -> Path:
        return self.folder / JSONL

    def predictions_dir(self, spec: ModelSpec) -> Path:
        return self.folder / PREDICTIONS / model_folder(spec.text)

    def write_predictions(
        self, spec: ModelSpec, dataset: str, split: str, predictions: list[dict[str, Any]], about: dict[str, Any]
    ) -> Path:
        """A pair's predictions as one JSON list (COCO results format for detection), and beside
        it ``<split>.about.json``: what made them (``about``: the adapter's description), so a
        replay of a smoke run is known as one."""
        path = self.predictions_dir(spec) / dataset / f"{split}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub(json.dumps(predictions)), encoding="utf-8")
        path.with_name(f"{split}.about.json").write_text(
            scrub(json.dumps({"run_id": self.run_id, **about}, default=str)), encoding="utf-8"
        )
        return path

    def write_records(self, spec: ModelSpec, dataset: str, split: str, records: list[dict[str, Any]],
                      suffix: str = ".jsonl") -> Path:
        """A pair's answers, one JSON line per image (per mosaic for grounding), in
        ``<split><suffix>`` (:data:`SAMPLES_SUFFIX`: the samples log)."""
        path = self.predictions_dir(spec) / dataset / f"{split}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub("".join(json.dumps(record, default=str) + "\n" for record in records)), encoding="utf-8")
        return path

    def write_file(self, spec: ModelSpec, dataset: str, name: str, text: str) -> Path:
        """A text file of a pair beside its predictions (its confusion matrix, say)."""
        path = self.predictions_dir(spec) / dataset / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub(text), encoding="utf-8")
        return path

    def append(self, row: ResultRow) -> None:
        """Add a row to ``results.jsonl`` and force it to disk before the next pair starts, under
        a file lock: several processes (pytest-xdist workers, runs sharing the folder) append
        whole lines, never interleaved ones."""
        from filelock import FileLock

        self.folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.jsonl) + ".lock"), self.jsonl.open("a", encoding="utf-8") as handle:
            handle.write(scrub(json.dumps(row.to_dict(), allow_nan=True)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def finish(self, rows: list[ResultRow], summary: str) -> None:
        """Write this run's ``results.parquet`` (as ``rf100vl-hf results summary`` writes it) and
        ``summary.md``; each is tried when the other cannot be written (a full disk), then the
        first failure is raised, an OSError naming its file (``results.jsonl`` is untouched)."""
        failures: list[OSError] = []
        columns = scrubbed([row.to_dict() for row in rows])
        writes = [lambda: write_parquet(columns, self.folder / PARQUET)] if rows else []
        writes.append(lambda: (self.folder / SUMMARY).write_text(scrub(summary), encoding="utf-8"))
        for write in writes:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                write()
            except OSError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


def _arrow_table(rows: Sequence[dict[str, Any]]) -> Any:
    """Rows as an Arrow table: one column per key any row has (null where a row lacks it), in
    the type the row schema declares (:func:`rf100vl_hf.results.schema.arrow_schema`: ``per_class``
    and ``answer_counts`` lists of structs, so that ``datasets`` can load them); an undeclared
    column is typed from its values, and one whose values are of mixed kinds is kept as JSON text.

    Arrow's JSON reader builds the columns: ``pa.array`` over Python objects would import pandas
    (half a second of every session's end, for nothing)."""
    import pyarrow as pa

    columns = list(dict.fromkeys(key for row in rows for key in row))
    if not columns:
        return pa.table({})
    declared = arrow_schema()
    values = {key: [_cell(key, row.get(key)) for row in rows] for key in columns}
    types = {key: declared.field(key).type if key in declared.names else _value_type(values[key]) for key in columns}
    try:
        return _read_json(values, types)
    except pa.ArrowInvalid:  # a column of mixed kinds of values: find it, and keep it as JSON text
        arrays = []
        for key in columns:
            try:
                arrays.append(_read_json({key: values[key]}, types).column(0))
            except pa.ArrowInvalid:
                text = [None if v is None else json.dumps(v, default=str) for v in values[key]]
                arrays.append(_read_json({key: text}, {key: pa.string()}).column(0))
        return pa.Table.from_arrays(arrays, names=columns)


def _cell(key: str, value: Any) -> Any:
    """A value as its column's Arrow type holds it (``answer_counts`` a list of ``{name, count}``)."""
    if key == "per_class":
        return _nan_to_none(value)
    if key == "answer_counts" and value is not None:
        return [{"name": name, "count": count} for name, count in value.items()]
    return value


def _value_type(values: Sequence[Any]) -> Any:
    """The Arrow type of an undeclared column of plain values (ints among floats: float), so that
    the JSON reader never takes a text for a timestamp; ``None`` (the reader infers it) for a
    column of lists or mappings, of mixed kinds, or of no value."""
    kinds = {type(value) for value in values if value is not None}
    if kinds == {int, float}:
        kinds = {float}
    return plain_arrow_types().get(kinds.pop()) if len(kinds) == 1 else None


def _read_json(values: dict[str, list[Any]], types: dict[str, Any]) -> Any:
    """The table of ``values`` (column -> its values, one per row) read by Arrow's JSON reader,
    each column of ``types`` in that type (NaN stays NaN), in the order of ``values``; a value
    JSON cannot hold (a date) as its text."""
    import pyarrow as pa
    import pyarrow.json as pj

    names = list(values)
    data = "".join(json.dumps(dict(zip(names, row)), default=str) + "\n" for row in zip(*values.values())).encode()
    schema = pa.schema([(key, types[key]) for key in names if types.get(key) is not None])
    return pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(block_size=len(data)),  # one block: a long row fits
                        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"),
                        ).select(names)


def _nan_to_none(items: Any) -> Any:
    if items is None:
        return None
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in item.items()} for item in items]


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write rows as one parquet file (written aside and renamed, so a reader never sees half)."""
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        pq.write_table(_arrow_table(rows), partial)
    except OSError as exc:  # Arrow names no file (a full disk): this one could not be written
        partial.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror or " ".join(str(exc).split()), str(path)) from exc
    partial.replace(path)
    return path


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """Rows from a parquet file written by :func:`write_parquet` (``answer_counts`` a dict again)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    for row in rows:
        if row.get("answer_counts") is not None:
            row["answer_counts"] = {item["name"]: item["count"] for item in row["answer_counts"]}
    return rows
