"""A results repository on the Hub: the results table as a dataset, with a leaderboard card.

Layout of the dataset repository:

- ``rf100vl/results.parquet`` and ``uouo/results.parquet``: one row per (model, dataset) pair,
  the configs ``rf100vl`` and ``uouo`` of ``load_dataset(repo_id, "rf100vl")`` (split ``train``);
- ``README.md``: the leaderboard (models against the seven domains and ``All``, and UOUO's
  Table 1), the figures, the RF100-VL table per dataset and the provenance of the rows;
- ``plots/*.png``: the figures of :mod:`rf100vl_hf.results.plots`;
- ``predictions/<run id>/...``: prediction files and each detection pair's confusion matrix
  (``<split>.confusion.csv``), when pushed with them.

The rows carry every column of the row schema, the error analysis among them
(``docs/errors.md``).

Pushing appends and merges: the rows on the Hub are read at the commit the push starts from,
merged with the new rows (the latest row per identity wins; nothing else is dropped; the
rows in the order they were measured, so the card and the tables are the same whichever push
lands last), and the commit is made against that parent commit. When someone else committed in between, the
Hub refuses it (412 or 409); the push then reads again, merges again and retries, a bounded
number of times. Two pushes racing each other therefore keep the rows of both.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import DataError
from rf100vl_hf.network import HubError, bounded, status_of, xet_or_lfs
from rf100vl_hf.progress import logger
from rf100vl_hf.protocols import PAPER
from rf100vl_hf.results.folder import read_parquet, write_parquet
from rf100vl_hf.results.plots import write_plots
from rf100vl_hf.results.rows import in_time_order, latest, read_jsonl, results_file, select
from rf100vl_hf.results.schema import AnyRow, ResultRow, as_rows
from rf100vl_hf.results.summary import provenance
from rf100vl_hf.results.tables import (
    SMOKE_NOTE,
    ap_table,
    by_protocol,
    leaderboard,
    protocol_note,
    to_markdown,
    uouo_table,
)

REPO_TYPE = "dataset"
CONFIGS = {"rf100vl": "rf100vl", "uouo": "uouo"}
"""Benchmark of a row -> the config (folder) holding it."""
SPLIT = "train"
CARD = "README.md"
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class PushedResults:
    """What a push did: the commit, how many rows the repository holds now, and tries it took."""

    commit_url: str
    rows: int
    attempts: int
    predictions: int


def table_path(config: str) -> str:
    return f"{config}/results.parquet"


def _is_rows(source: Sequence[Any]) -> bool:
    return bool(source) and all(isinstance(item, Mapping) for item in source)


def local_rows(source: Sequence[Any], run: str | None = None, latest_run: bool = False
               ) -> list[tuple[ResultRow, Path | None]]:
    """The selected rows (see :func:`rf100vl_hf.results.rows.select`) with the folder each came
    from (None for rows given directly)."""

    if _is_rows(source):
        pairs: list[tuple[ResultRow, Path | None]] = [(row, None) for row in as_rows(source)]
    else:
        pairs = []
        for folder in source:
            path = results_file(Path(folder))
            pairs += [(row, path.parent) for row in read_jsonl(path)]
    winners = {id(row) for row in select([row for row, _ in pairs], run, latest_run)}
    return [(row, folder) for row, folder in pairs if id(row) in winners]


PAIR_FILES = ("predictions_file", "confusion_file")
"""The columns naming a pair's files beside its predictions, published with them."""


def _prediction_file(named: str | None, folder: Path | None) -> tuple[Path, str] | None:
    """The file a row names (``named``) on disk, and its path under the results folder."""
    if not named:
        return None
    path = Path(named)
    if not path.is_absolute() and folder is not None:
        path = folder / path
    if not path.is_file():
        return None
    relative = path.relative_to(folder).as_posix() if folder is not None and path.is_relative_to(folder) else \
        f"predictions/{path.parent.parent.name}/{path.parent.name}/{path.name}"
    return path, relative


def public_rows(pairs: Sequence[tuple[ResultRow, Path | None]], with_predictions: bool
                ) -> tuple[list[ResultRow], dict[str, Path]]:
    """Rows as published (a prediction file, or a confusion matrix, is named by its path in
    the repository when uploaded, else by its path under the results folder, never by a path
    of this machine), and the files to upload (path in the repository -> file)."""
    rows, uploads = [], {}
    for row, folder in pairs:
        sections = {}
        for name, section in (("scores", row.scores), ("errors", row.errors)):
            named = {column: getattr(section, column) for column in PAIR_FILES if hasattr(section, column)}
            for column, path in named.items():
                found = _prediction_file(path, folder)
                if found is None:
                    named[column] = None
                elif with_predictions:
                    named[column] = f"predictions/{row.run.run_id}/{found[1].removeprefix('predictions/')}"
                    uploads[named[column]] = found[0]
                else:
                    named[column] = found[1]
            sections[name] = replace(section, **named) if named else section
        rows.append(replace(row, **sections))
    return rows, uploads


def card_text(repo_id: str, rows: Sequence[AnyRow], figures: Sequence[str]) -> str:
    """The card: YAML listing the configs, then the leaderboard, figures, table and provenance."""
    import yaml

    rows = as_rows(rows)
    present = [config for benchmark, config in CONFIGS.items() if any(r.data.benchmark == benchmark for r in rows)]
    header = {
        "pretty_name": f"Results: {repo_id}",
        "tags": ["rf100vl-hf", "leaderboard", "object-detection"],
        "configs": [{"config_name": c, "data_files": [{"split": SPLIT, "path": table_path(c)}]} for c in present],
    }
    detection = [row for row in rows if row.data.benchmark == "rf100vl"]
    grounding = [row for row in rows if row.data.benchmark == "uouo"]
    lines = [f"# Results: {repo_id}", "",
             "Benchmark results written by `rf100vl-hf` (RF100-VL: AP50:95 in percent at maxDets 500 under the "
             "paper's protocol; UOUO: mIoU and quadrant accuracy as fractions). Load the rows with",
             "", "```python", "from datasets import load_dataset",
             *(f'load_dataset("{repo_id}", "{c}", split="{SPLIT}")' for c in present), "```", ""]
    if any(row.model.smoke for row in rows):
        lines += [f"**Models marked {SMOKE_NOTE}.**", ""]
    protocols = by_protocol(detection)
    for name, own in protocols.items():  # rows of two protocols never rank together
        board = leaderboard(own)
        scored = "" if list(protocols) == [PAPER] else f", {protocol_note(name)}"
        lines += [f"## Leaderboard: RF100-VL, {board.title}{scored}", "", *to_markdown(board), ""]
    if grounding:
        table = uouo_table(grounding)
        lines += [f"## {table.title}", "", *to_markdown(table), ""]
    if figures:
        lines += ["## Figures", "", *(f"![{Path(f).stem}]({f})" for f in figures), ""]
    if detection:
        table = ap_table(detection)
        lines += [f"## RF100-VL per dataset, {table.title}", "", *to_markdown(table), ""]
    lines += ["## Provenance", "", *provenance(rows), ""]
    return f"---\n{yaml.safe_dump(header, sort_keys=False)}---\n\n" + "\n".join(lines)


def write_results_repo(folder: Path, repo_id: str, rows: Sequence[AnyRow]) -> list[str]:
    """Write the repository's files (tables, card, figures) into ``folder``; return their paths."""

    folder = Path(folder)
    typed = as_rows(rows)
    written = []
    for benchmark, config in CONFIGS.items():
        chosen = [row.to_dict() for row in typed if row.data.benchmark == benchmark]
        if chosen:
            write_parquet(chosen, folder / table_path(config))
            written.append(table_path(config))
    figures = [f"plots/{p.name}" for p in write_plots(typed, folder / "plots", confusion=False)]
    (folder / CARD).write_text(card_text(repo_id, typed, figures), encoding="utf-8")
    return [*written, *figures, CARD]


def remote_rows(api: Any, repo_id: str, revision: str, token: str | None) -> list[ResultRow]:
    """The rows the repository holds at ``revision`` (none in a new repository)."""
    from huggingface_hub.errors import EntryNotFoundError


    rows = []
    for config in CONFIGS.values():
        try:
            path = api.hf_hub_download(repo_id, table_path(config), repo_type=REPO_TYPE, revision=revision, token=token)
        except EntryNotFoundError:
            continue
        try:
            rows += as_rows(read_parquet(Path(path)))
        except Exception as exc:  # pyarrow raises several kinds for a file it cannot read
            raise DataError(f"{repo_id}@{revision[:12]}", table_path(config), f"cannot be read as parquet ({exc})") from None
    return rows


def push_results(
    source: Sequence[Any],
    repo_id: str,
    token: str | None = None,
    private: bool = False,
    with_predictions: bool = False,
    timeout: float | None = None,
    max_attempts: int = MAX_ATTEMPTS,
    commit_message: str | None = None,
    run: str | None = None,
    latest_run: bool = False,
) -> PushedResults:
    """Append-and-merge ``source`` into the results dataset ``repo_id`` (created if needed).

    ``source`` is a list of results folders (or ``results.jsonl`` files), or a list of row
    dicts; ``run`` or ``latest_run`` choose the rows of one run. Nothing local is written or
    changed. Each attempt reads the rows at the current head, merges, and commits against it.
    Every request is bounded by ``timeout`` seconds; a failure raises one-line
    :class:`~rf100vl_hf.network.HubError` or :class:`~rf100vl_hf.hub.auth.HubAuthError`.
    """
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    from rf100vl_hf.hub.auth import check_token, refused_as_auth_error

    pairs = local_rows(list(source), run, latest_run)
    if not pairs:
        raise DataError(", ".join(str(s) for s in source) if not _is_rows(source) else "rows", "rows",
                        "no results rows to push")
    rows, uploads = public_rows(pairs, with_predictions)
    api = HfApi()
    message = commit_message or f"Add {len(rows)} results row(s) with rf100vl-hf"
    with bounded(api.endpoint, f"pushing results to {repo_id}", timeout) as seconds:
        token = check_token(api, token)
        with refused_as_auth_error(api, repo_id, REPO_TYPE):
            api.create_repo(repo_id, token=token, private=private, repo_type=REPO_TYPE, exist_ok=True)
            with xet_or_lfs(api.endpoint, repo_id, REPO_TYPE, token):
                for attempt in range(1, max_attempts + 1):
                    head = api.repo_info(repo_id, repo_type=REPO_TYPE, token=token, timeout=seconds).sha
                    merged = in_time_order(latest(remote_rows(api, repo_id, head, token) + rows))
                    with tempfile.TemporaryDirectory(prefix="rf100vl-results-") as staging:
                        files = write_results_repo(Path(staging), repo_id, merged)
                        operations = [CommitOperationAdd(path, str(Path(staging) / path)) for path in files]
                        operations += [CommitOperationAdd(path, str(file)) for path, file in uploads.items()]
                        try:
                            info = api.create_commit(repo_id, operations, commit_message=message, token=token,
                                                     repo_type=REPO_TYPE, parent_commit=head)
                        except HfHubHTTPError as exc:
                            if status_of(exc) not in (409, 412):
                                raise
                            logger.info("results push to %s: the repository moved on (%s)", repo_id, status_of(exc))
                            continue
                    return PushedResults(info.commit_url, len(merged), attempt, len(uploads))
    raise HubError(f"pushing results to {repo_id}: the repository kept changing during "
                   f"{max_attempts} attempts; push again")
