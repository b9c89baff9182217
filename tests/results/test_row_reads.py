"""A row stays a row: the project reads a results row by attribute (``row.scores.ap``), not by
string key. This counts what is left: every ``x["col"]`` and ``x.get("col")`` whose key is a
column :class:`~rf100vl_hf.results.schema.ResultRow` declares, found by AST in both packages
(and ``row.column("col")`` with a literal name: that method is for names held as data),
outside the schema module and the functions that read a results file (where a row is still
the file's JSON object). Any mapping read with such a key counts, whatever ``x`` is, except
the mappings :data:`NOT_ROWS` names one by one (a dataset's metadata, an adapter's
``describe()``: each with why it is no row, and each must still occur). A pandas or pyarrow
column select with a literal column name counts the same way: it is a subscript with a
column's name."""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path

from rf100vl_hf.results import schema

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rf100vl_hf", "pytest_rf100vl")
SCHEMA = "rf100vl_hf/results/schema.py"
READERS = {  # file -> the functions in it that read a results file's raw JSON objects (before from_dict)
    "rf100vl_hf/results/rows.py": {"_row_problem", "_parsed", "read_jsonl"},
    "rf100vl_hf/results/folder.py": {"read_parquet"},
}
LIMIT = 20
NOT_ROWS: dict[str, dict[str, str]] = {  # file -> the receiver, as written -> what it is instead of a row
    "rf100vl_hf/hub/card.py": {"item": "a config's split in the card's YAML", "metadata": "a dataset's metadata"},
    "rf100vl_hf/hub/eval_status.py": {"item": "an evaluation result entry of the Hub's YAML"},
    "rf100vl_hf/hub/eval_yaml.py": {"read_metadata(config.info())": "a dataset's metadata"},
    "rf100vl_hf/hub/rf100vl_card.py": {"meta": "a dataset's metadata", "row[1]": "a (config, metadata) pair's metadata",
                                       "rows[0][1]['fewshot']": "a dataset's metadata",
                                       "rows[0][1]['semisup']": "a dataset's metadata"},
    "rf100vl_hf/hub/specification.py": {"task": "a task of the evaluation results specification"},
    "rf100vl_hf/hub/uouo_card.py": {"meta": "a dataset's metadata", "meta['clip']": "a dataset's metadata",
                                    "r": "a row of UOUO's published Table 1"},
    "rf100vl_hf/metrics/errors.py": {"found": "calibration figures"},
    "rf100vl_hf/results/draw.py": {"box": "a box of a samples log line"},
    "rf100vl_hf/results/tables.py": {"item": "a class of a row's per_class list", "means": "means by metric name"},
    "rf100vl_hf/training/loop.py": {"saved": "a training checkpoint", "state": "a training checkpoint"},
    "pytest_rf100vl/adapters/hf.py": {"arguments": "a model's loading arguments", "described": "describe()"},
    "pytest_rf100vl/adapters/replay.py": {"json.loads(about.read_text(encoding='utf-8'))": "a replay's about file"},
    "pytest_rf100vl/adapters/text_answers.py": {"record": "a COCO results record", "self.options": "adapter options"},
    "pytest_rf100vl/engine/answer_cache.py": {"value": "an answer cache key part"},
    "pytest_rf100vl/engine/columns.py": {"described": "the adapter's describe()"},
    "pytest_rf100vl/kinds/rf100vl/identity.py": {"fewshot": "a dataset's metadata", "semisup": "a dataset's metadata"},
    "pytest_rf100vl/kinds/rf100vl/split.py": {"metadata": "a dataset's metadata"},
    "pytest_rf100vl/kinds/rf100vl/tasks.py": {"metadata.get('fewshot', {})": "a dataset's metadata"},
    "pytest_rf100vl/kinds/uouo/kind.py": {"metadata": "a dataset's metadata", "metadata['clip']": "a dataset's metadata"},
}


@functools.cache
def columns() -> frozenset[str]:
    sections = (schema.RunColumns, schema.ModelColumns, schema.DataColumns, *schema.SCORES.values(),
                *schema.DATA.values(), *schema.ERRORS.values(), schema.CheckColumns, schema.ThroughputColumns,
                schema.OutputColumns, schema.TrainingColumns, schema.ProvenanceColumns)
    return frozenset(item.name for section in sections for item in dataclasses.fields(section)) - {"minimums", "versions"}


def _read(node: ast.AST) -> tuple[str, str] | None:
    """``(key, receiver)`` of ``x["key"]``, ``x.get("key")`` or ``x.column("key")``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value, ast.unparse(node.value)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "column")
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value, ast.unparse(node.func.value)
    return None


@functools.cache
def string_key_reads(path: Path, root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(file:line, key, receiver)`` of each string-key read of a row column in ``path``,
    outside its reader functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = path.relative_to(root).as_posix()
    skipped = {id(inner) for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name in READERS.get(name, ()) for inner in ast.walk(node)}
    names = columns()
    return [(f"{name}:{node.lineno}", *read) for node in ast.walk(tree)
            if id(node) not in skipped and (read := _read(node)) is not None and read[0] in names]


def row_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line key`` of each string-key row read in ``path`` (:data:`NOT_ROWS` left out)."""
    exempt = NOT_ROWS.get(path.relative_to(root).as_posix(), {})
    return [f"{where} {key}" for where, key, receiver in string_key_reads(path, root) if receiver not in exempt]


def all_reads(root: Path = ROOT) -> list[str]:
    return [read for package in PACKAGES for path in sorted((root / package).rglob("*.py"))
            if path != root / SCHEMA for read in row_reads(path, root)]


def test_every_mapping_left_out_of_the_count_is_still_read_there():
    for file, receivers in NOT_ROWS.items():
        found = {receiver for _, _, receiver in string_key_reads(ROOT / file)}
        assert set(receivers) <= found, f"{file}: no longer reads {sorted(set(receivers) - found)}: drop them"


def test_the_counter_finds_subscripts_and_gets_of_columns_only(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text('row["ap"]\nrow.get("model")\nrow["not_a_column"]\nrow.scores.ap\nrow[key]\nrow.column("miou")\n'
                    'row.column(key)\n', encoding="utf-8")
    assert sorted(read.split(" ")[1] for read in row_reads(path, tmp_path)) == ["ap", "miou", "model"]


def test_at_most_twenty_string_key_row_reads_outside_the_schema_and_the_readers():
    reads = all_reads()
    assert len(reads) <= LIMIT, f"{len(reads)} string-key row reads (at most {LIMIT}):\n" + "\n".join(reads)
