"""A results row read back as the pair it measured: its split of the dataset on disk (checked
to be the one the row was scored on) and its predictions file, matched image by image.

``results compare`` and ``draw`` start here. A row names its predictions file by the path the
run wrote; a results folder that was moved or copied is still read, from ``predictions/``
inside it. A file that no longer gives the row's AP (a later run of the same model, dataset
and split wrote over it) is an error, never a silent mismatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rf100vl_hf.boxes import MAX_DETECTIONS
from rf100vl_hf.errors import DataError
from rf100vl_hf.metrics.resample import ImageMatches
from rf100vl_hf.protocols import PROTOCOLS
from rf100vl_hf.results.rows import read_jsonl, results_file, select
from rf100vl_hf.results.schema import AnyRow, ResultRow, as_row

AP_TOLERANCE = 1e-6
"""How far (AP points) the AP recomputed from a predictions file may be from its row's."""


@dataclass(frozen=True)
class Split:
    """The images a row was scored on, with what scoring them needs."""

    dataset: Any  # datasets.Dataset: the split, cut to the row's limit
    ground_truth: dict[str, Any]  # COCO ground truth, the export's own ids
    classes: list[str]
    category_ids: list[int]
    max_dets: int = MAX_DETECTIONS  # the row's protocol's maxDets


def located_rows(folder: Path) -> tuple[Path, list[ResultRow]]:
    """The results folder of ``folder`` (a folder, or its ``results.jsonl``) and its RF100-VL
    rows, the latest of each identity."""

    path = results_file(Path(folder))
    return path.parent, [row for row in select(read_jsonl(path)) if row.data.benchmark == "rf100vl"]


def describe(row: ResultRow) -> str:
    """A row as a person names it: ``spec on dataset (split)``."""
    return f"{row.spec} on {row.data.dataset} ({row.data.split})"


def predictions_path(row: ResultRow, folder: Path, column: str = "predictions_file") -> Path:
    """The predictions file a row points at (or the file of another ``column``: the samples log
    of ``samples_file``): as recorded, else relative to its results folder, else at its place
    under ``predictions/`` of the folder (which was moved)."""
    named = row.column(column)
    if not named:
        raise DataError(folder, describe(row), f"the row names no file in {column}")
    recorded = Path(named)
    candidates = [recorded if recorded.is_absolute() else folder / recorded,
                  folder.joinpath("predictions", *recorded.parts[-3:])]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise DataError(candidates[0], column, f"missing (the file of {describe(row)}; looked for "
                    f"{' and '.join(str(c) for c in dict.fromkeys(candidates))})")


def read_predictions(path: Path, category_ids: list[int]) -> tuple[list[dict[str, Any]], int]:
    """The COCO results records of a file, less those of a category that is not a class (as
    pycocotools ignores them), and how many those were."""
    try:
        records = json.loads(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise DataError(path, "file", f"cannot be read as JSON ({exc})") from None
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        raise DataError(path, "file", "expected a JSON list of COCO results records")
    classes = set(category_ids)
    kept = [record for record in records if record.get("category_id") in classes]
    return kept, len(records) - len(kept)


def load_split(dataset: str, split: str, data_dir: Path | None = None, fewshot_dir: Path | None = None,
               limit: int | None = None, fingerprint: str | None = None, **config: Any) -> Split:
    """``split`` of ``dataset`` as prepared from the exports (its first ``limit`` images when
    given; ``config``: the builder's split parameters); with ``fingerprint``, the exports must
    be the ones a row was scored on."""
    from rf100vl_hf.metadata import read_metadata
    from rf100vl_hf.metrics import coco_ground_truth
    from rf100vl_hf.rf100vl.builder import load_rf100vl

    splits = load_rf100vl(dataset, data_dir=data_dir, fewshot_dir=fewshot_dir, progress=False, **config)
    if split not in splits:
        raise DataError(dataset, "split", f"no split {split!r} (it has: {', '.join(splits)})")
    chosen = splits[split] if limit is None else splits[split].select(range(min(limit, len(splits[split]))))
    metadata = read_metadata(chosen)
    if fingerprint is not None and metadata.get("fingerprint") != fingerprint:
        raise DataError(dataset, "dataset_fingerprint", f"the export on disk ({metadata.get('fingerprint')}) is not "
                        f"the one the results were scored on ({fingerprint}); point --data-dir at that export")
    category_ids = [int(c) for c in metadata["category_ids"]]
    return Split(chosen, coco_ground_truth(chosen, category_ids), list(metadata["classes"]), category_ids)


def row_split(row: AnyRow, data_dir: Path | None = None, fewshot_dir: Path | None = None) -> Split:
    """The images ``row`` was scored on (the few-shot export's test split when the row says so),
    scored at its protocol's maxDets."""
    row = as_row(row)
    data = row.data
    made = json.loads(data.split_parameters or "{}")
    config = {**({"test_source": "fewshot"} if made.get("test_source") == "fewshot" else {}),
              **({"fewshot_class_match": "id"} if made.get("class_match") == "id" else {})}
    split = load_split(data.dataset, data.split or "test", data_dir, fewshot_dir, data.limit,
                       data.dataset_fingerprint, **config)
    protocol = PROTOCOLS.get(row.protocol)
    if protocol is None:
        raise DataError(describe(row), "protocol", f"unknown protocol {row.protocol!r} (known: "
                        f"{', '.join(PROTOCOLS)}): a newer rf100vl-hf wrote this row")
    return replace(split, max_dets=protocol.max_dets)


def matched(path: Path, split: Split) -> tuple[ImageMatches, list[dict[str, Any]]]:
    """The predictions of ``path`` matched to ``split``'s ground truth, and the records matched
    (errors in a record name the file)."""
    from rf100vl_hf.metrics.resample import match_images

    records, _ = read_predictions(path, split.category_ids)
    try:
        return match_images(split.ground_truth, records, split.max_dets), records
    except DataError as exc:
        raise DataError(path, exc.field, exc.reason) from None


def row_matches(row: AnyRow, folder: Path, split: Split) -> ImageMatches:
    """A row's predictions matched to its split, checked to give the row's AP."""
    row = as_row(row)
    path = predictions_path(row, folder)
    matches, _ = matched(path, split)
    recorded = row.scores.ap
    if isinstance(recorded, (int, float)):
        recomputed = 100 * matches.ap()
        if abs(recomputed - recorded) > AP_TOLERANCE:
            raise DataError(path, "ap", f"scores {recomputed:.4f} on the dataset on disk, but the row of "
                            f"{describe(row)} says {recorded:.4f}: a later run wrote over the file, or the "
                            "export changed")
    return matches
