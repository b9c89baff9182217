"""Per-config metadata that travels with a dataset through every load route.

``datasets`` keeps no free-form metadata, but it does keep ``DatasetInfo.description``: in
the Arrow cache's ``dataset_info.json`` and, because the Hub export writes it into each
config's ``dataset_info`` in the card's YAML, through parquet repositories too. The
description therefore holds the metadata as JSON, and :func:`read_metadata` gets it back
from a ``Dataset``, a ``DatasetDict`` or a ``DatasetInfo``. Metadata is where class names and
annotator instructions enter when a dataset comes from someone else's Hub repository rather
than through the export reader, so it is held to the reader's rule: no text in it may hold
a control character (:mod:`rf100vl_hf.controls`), or prompts and summaries would carry it.
"""

from __future__ import annotations

import json
from typing import Any

import datasets

from rf100vl_hf.controls import control_problem
from rf100vl_hf.errors import DataError

MARKER = "rf100vl-hf metadata: "


def to_description(metadata: dict[str, Any]) -> str:
    """The ``DatasetInfo.description`` that carries ``metadata`` (see :func:`read_metadata`)."""
    return MARKER + json.dumps(metadata, sort_keys=True, ensure_ascii=False)


def read_metadata(obj: datasets.Dataset | datasets.DatasetDict | datasets.DatasetInfo) -> dict[str, Any]:
    """The metadata dict written by this package's builders, from a loaded dataset or its info."""
    if isinstance(obj, datasets.DatasetDict):
        obj = next(iter(obj.values()))
    info = obj if isinstance(obj, datasets.DatasetInfo) else obj.info
    description = info.description or ""
    if not description.startswith(MARKER):
        raise ValueError(
            "this dataset carries no rf100vl-hf metadata (its info.description does not start with "
            f"{MARKER.strip()!r}); was it built by rf100vl-hf?"
        )
    metadata = json.loads(description[len(MARKER) :])
    _check_text(metadata, info.config_name or info.dataset_name or "dataset", "metadata")
    return metadata


def _check_text(value: Any, dataset: str, where: str) -> None:
    """A :class:`DataError` naming the dataset and the field of the first text in ``value`` that
    holds a control character (tab and line break aside: instructions are paragraphs)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, dataset, where)
            _check_text(item, dataset, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_text(item, dataset, f"{where}[{index}]")
    elif isinstance(value, str):
        problem = control_problem(value, multiline=True)
        if problem:
            raise DataError(dataset, where, problem)
