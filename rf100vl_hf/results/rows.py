"""Results rows: read from ``results.jsonl`` files, identified, merged and selected.

Runs of one benchmark may be split across sessions, shards and machines; each writes its
own ``results.jsonl``. Reading several folders and keeping the latest row per *identity*
(what was run on what, not when) gives one table, the same as one session that ran it all.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import DataError, Rf100vlError, shown
from rf100vl_hf.results.folder import JSONL
from rf100vl_hf.results.schema import IDENTITY, THROUGHPUT, AnyRow, ResultRow, as_row, as_rows

class SelectionError(Rf100vlError, ValueError):
    """A run selection that matches nothing (the message lists what there is)."""


class TornLineWarning(UserWarning):
    """The last line of a ``results.jsonl`` was cut short (a run killed while writing it)."""


def measured(row: ResultRow) -> bool:
    """Whether the row has a throughput of its own (a finite images/s)."""
    value = row.throughput.images_per_s
    return isinstance(value, (int, float)) and math.isfinite(value)


def with_measured_throughput(row: ResultRow, candidates: Sequence[ResultRow]) -> ResultRow:
    """``row``, with the throughput of the latest of ``candidates`` of its identity that
    measured one when it measured none itself (its answers came from the answer cache), and
    ``throughput_from`` naming the run that measured it: a missing figure never replaces a
    measured one."""
    if measured(row):
        return row
    key = _hashable(identity(row))
    donors = [other for other in candidates if measured(other) and _hashable(identity(other)) == key]
    if not donors:
        return row
    donor = max(donors, key=_when)
    taken = {name: getattr(donor.throughput, name) for name in THROUGHPUT}
    throughput = dataclasses.replace(row.throughput, **taken,
                                     throughput_from=donor.throughput.throughput_from or donor.run.run_id)
    return dataclasses.replace(row, throughput=throughput)


def identity(row: AnyRow) -> tuple[Any, ...]:
    """The row's identity: the values of :data:`IDENTITY` (:meth:`ResultRow.identity`)."""
    return tuple(as_row(row).identity().values())


def _row_problem(row: dict[str, Any]) -> tuple[str, str] | None:
    """``(field, why)`` when ``row`` lacks what every table of rows needs, else ``None``: a
    benchmark, a dataset and a model named as text, and per-class results (when it has them) as
    a list of objects with a class name."""
    if not isinstance(row.get("model"), str) and isinstance(row.get("spec"), str):
        row = {**row, "model": row["spec"]}
    for key in ("benchmark", "dataset", "model"):
        if not isinstance(row.get(key), str):
            got = f", got {shown(row[key])}" if key in row and row[key] is not None else ""
            return key, f"a results row needs {key} (a string){got}"
    per_class = row.get("per_class")
    if per_class is None:
        return None
    if not isinstance(per_class, list):
        return "per_class", f"expected a list of {{class, ap, ap50, n_instances}}, got {shown(per_class)}"
    for index, item in enumerate(per_class):
        if not isinstance(item, dict) or not isinstance(item.get("class"), str):
            return f"per_class[{index}]", f"expected an object with a class name, got {shown(item)}"
    return None


def read_jsonl(path: Path) -> list[ResultRow]:
    """The rows of one ``results.jsonl``, each read through :meth:`ResultRow.from_dict`.

    A last line without its line break was cut short by a killed run: it is skipped with a
    :class:`TornLineWarning`. Any other line that is not a JSON object, or a row without
    what every table needs (:func:`_row_problem`), is an error naming the file, the line and
    the field.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(path, "file", f"cannot be read ({exc.strerror or exc})") from None
    return _parsed(path, data.split(b"\n"), 1, torn_last=True)


def _parsed(path: Path, lines: list[bytes], first: int, torn_last: bool) -> list[ResultRow]:
    """The rows of ``lines`` of ``path``, numbered from ``first`` (see :func:`read_jsonl`)."""
    rows = []
    for number, line in enumerate(lines, start=first):
        if not line.strip():
            continue
        torn = torn_last and number == first + len(lines) - 1  # only the last piece lacks its line break
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if torn:
                warnings.warn(f"{path}: line {number}: cut short (no line break, not JSON); skipped",
                              TornLineWarning, stacklevel=3)
                continue
            raise DataError(path, f"line {number}", f"not JSON ({str(exc)[:120]})") from None
        if not isinstance(row, dict):
            raise DataError(path, f"line {number}", f"expected a JSON object (a results row), got {type(row).__name__}")
        problem = _row_problem(row)
        if problem is not None:
            raise DataError(path, f"line {number}: {problem[0]}", problem[1])
        rows.append(ResultRow.from_dict(row))
    return rows


class JsonlTail:
    """Follows a ``results.jsonl`` that others append to: each :meth:`new_rows` reads only
    the whole lines added since the last call (a line still being written waits for the next),
    so following a run's rows costs each row once, not the whole file per row."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0
        self._lines = 0

    def new_rows(self) -> list[ResultRow]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise DataError(self.path, "file", f"cannot be read ({exc.strerror or exc})") from None
        whole = data[: data.rfind(b"\n") + 1]
        lines = whole.split(b"\n")[:-1]
        rows = _parsed(self.path, lines, self._lines + 1, torn_last=False)
        self._offset += len(whole)
        self._lines += len(lines)
        return rows


def results_file(folder: Path) -> Path:
    """The ``results.jsonl`` of a results folder (or the file itself)."""
    folder = Path(folder)
    path = folder if folder.is_file() else folder / JSONL
    if not path.is_file():
        raise DataError(folder, JSONL, "missing: not a results folder (pytest writes one under .rf100vl/results)")
    return path


def read_results(folders: Iterable[Path]) -> list[ResultRow]:
    """Every row of the ``results.jsonl`` of each folder (or file), in order."""
    return [row for folder in folders for row in read_jsonl(results_file(folder))]


def _when(row: ResultRow) -> datetime:
    """The row's timestamp; a row without a readable one counts as the oldest."""
    try:
        when = datetime.fromisoformat(str(row.run.timestamp))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def latest(rows: Sequence[AnyRow]) -> list[ResultRow]:
    """The latest row of each identity (by timestamp; on a tie, the one read last), in the
    order the winning rows were read; a winner answered from the answer cache keeps the
    throughput an older row of its identity measured (:func:`with_measured_throughput`)."""
    rows = as_rows(rows)
    best: dict[tuple[Any, ...], int] = {}
    for index, row in enumerate(rows):
        key = _hashable(identity(row))
        if key not in best or _when(row) >= _when(rows[best[key]]):
            best[key] = index
    return [with_measured_throughput(rows[index], rows) for index in sorted(best.values())]


def in_time_order(rows: Sequence[ResultRow]) -> list[ResultRow]:
    """``rows`` in the order they were measured (by timestamp; rows of one time keep their order):
    the same list whichever source was read first, as a repository merged from racing pushes
    must be."""
    return sorted(rows, key=_when)


def _hashable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in values)


def run_ids(rows: Sequence[ResultRow]) -> list[str]:
    """Run ids from the oldest run to the latest (a run's time is that of its latest row)."""
    last: dict[str, datetime] = {}
    for row in rows:
        run = str(row.run.run_id)
        last[run] = max(last.get(run, _when(row)), _when(row))
    return sorted(last, key=lambda run: last[run])


def select(rows: Sequence[AnyRow], run: str | None = None, latest_run: bool = False) -> list[ResultRow]:
    """Rows of one run (``run``), of the latest run (``latest_run``), or of all runs (neither),
    then the latest row per identity."""
    if run is not None and latest_run:
        raise SelectionError("choose one of a run id and the latest run")
    rows = as_rows(rows)
    if not rows:
        return []
    if latest_run:
        run = run_ids(rows)[-1]
    if run is not None:
        chosen = [row for row in rows if str(row.run.run_id) == run]
        if not chosen:
            raise SelectionError(f"no rows of run {run!r}; runs found: {', '.join(run_ids(rows))}")
        rows = chosen
    return latest(rows)
