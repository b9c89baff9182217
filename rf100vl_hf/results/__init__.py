"""Results of benchmark runs: read ``results.jsonl`` folders, merge them, and render them as
tables (markdown, csv, LaTeX), a summary, parquet and figures.

A results row is one (model, dataset) pair of one run, as the pytest plugin writes it: a
:class:`~rf100vl_hf.results.schema.ResultRow`, which reading a ``results.jsonl`` gives (the
tables also take a file's row dicts, read through ``ResultRow.from_dict``), so the functions
here serve the plugin at the end of a session, the ``rf100vl-hf results`` commands and the
Hub results repository alike.
"""

from rf100vl_hf.results.folder import PARQUET, SUMMARY, read_parquet, write_parquet
from rf100vl_hf.results.rows import (
    IDENTITY,
    JSONL,
    SelectionError,
    identity,
    latest,
    read_jsonl,
    read_results,
    select,
)
from rf100vl_hf.results.summary import summary, write_summary
from rf100vl_hf.results.tables import (
    ERROR_METRICS,
    FORMATS,
    METRICS,
    Table,
    ap_table,
    error_tables,
    leaderboard,
    per_class_tables,
    render,
    uouo_table,
)

__all__ = [
    "ERROR_METRICS",
    "FORMATS",
    "IDENTITY",
    "JSONL",
    "METRICS",
    "PARQUET",
    "SUMMARY",
    "SelectionError",
    "Table",
    "ap_table",
    "error_tables",
    "identity",
    "latest",
    "leaderboard",
    "per_class_tables",
    "read_jsonl",
    "read_parquet",
    "read_results",
    "render",
    "select",
    "summary",
    "uouo_table",
    "write_parquet",
    "write_summary",
]
