"""Helpers of the plugin's tests: data folders made of links, and the results they leave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def link(data_dir: Path, name: str, export: Path) -> None:
    """Make ``export`` appear as the dataset ``name`` of ``data_dir``."""
    (data_dir / name).symlink_to(export, target_is_directory=True)


def results(folder: Path) -> list[dict[str, Any]]:
    """The rows of ``results.jsonl`` in a results folder."""
    lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def session_rows(folder: Path) -> list[dict[str, Any]]:
    """The rows of the last session that wrote to a results folder (its ``results.parquet``),
    the rows it reused from earlier runs included (``results.jsonl`` holds those once)."""
    from rf100vl_hf.results.folder import PARQUET, read_parquet

    return read_parquet(folder / PARQUET)
