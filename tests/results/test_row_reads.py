"""A row stays a row: the project reads a results row by attribute (``row.scores.ap``), not by
string key. This counts what is left: every ``x["col"]`` and ``x.get("col")`` whose key is a
column :class:`~rf100vl_hf.results.schema.ResultRow` declares, found by AST in both packages
(and ``row.column("col")`` with a literal name: that method is for names held as data),
outside the schema module and the functions that read a results file (where a row is still
the file's JSON object). Any mapping read with such a key counts, whatever ``x`` is (a
``describe()`` dict too), so the count errs high. A pandas or pyarrow column select with a
literal column name counts the same way: it is a subscript with a column's name."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from rf100vl_hf.results import schema

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rf100vl_hf", "pytest_rf100vl")
SCHEMA = ROOT / "rf100vl_hf" / "results" / "schema.py"
READERS = {  # file -> the functions in it that read a results file's raw JSON objects
    ROOT / "rf100vl_hf" / "results" / "rows.py": {"_row_problem", "_parsed", "read_jsonl"},
    ROOT / "rf100vl_hf" / "results" / "folder.py": {"read_parquet"},
}
LIMIT = 20


def columns() -> set[str]:
    sections = (schema.RunColumns, schema.ModelColumns, schema.DataColumns, *schema.SCORES.values(),
                *schema.DATA.values(), *schema.ERRORS.values(), schema.CheckColumns, schema.ThroughputColumns,
                schema.OutputColumns, schema.TrainingColumns, schema.ProvenanceColumns)
    return {item.name for section in sections for item in dataclasses.fields(section)} - {"minimums", "versions"}


def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value if isinstance(node.slice.value, str) else None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "column")
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def row_reads(path: Path) -> list[str]:
    """``file:line key`` of each string-key read of a row column in ``path``, outside its reader functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(inner) for node in ast.walk(tree)
               if isinstance(node, ast.FunctionDef) and node.name in READERS.get(path, ())
               for inner in ast.walk(node)}
    names = columns()
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    return [f"{name}:{node.lineno} {key}" for node in ast.walk(tree)
            if id(node) not in skipped and (key := _key(node)) in names]


def all_reads() -> list[str]:
    return [read for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")) if path != SCHEMA
            for read in row_reads(path)]


def test_the_counter_finds_subscripts_and_gets_of_columns_only(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text('row["ap"]\nrow.get("model")\nrow["not_a_column"]\nrow.scores.ap\nrow[key]\nrow.column("miou")\n'
                    'row.column(key)\n', encoding="utf-8")
    assert sorted(read.split(" ")[1] for read in row_reads(path)) == ["ap", "miou", "model"]


def test_at_most_twenty_string_key_row_reads_outside_the_schema_and_the_readers():
    reads = all_reads()
    assert len(reads) <= LIMIT, f"{len(reads)} string-key row reads (at most {LIMIT}):\n" + "\n".join(reads)
