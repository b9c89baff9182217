"""Per-config metadata that travels with a dataset through every load route.

``datasets`` keeps no free-form metadata, but it does keep ``DatasetInfo.description``: in
the Arrow cache's ``dataset_info.json`` and, because the Hub export writes it into each
config's ``dataset_info`` in the card's YAML, through parquet repositories too. The
description therefore holds the metadata as JSON, and :func:`read_metadata` gets it back
from a ``Dataset``, a ``DatasetDict`` or a ``DatasetInfo``.
"""

from __future__ import annotations

import json
from typing import Any

import datasets

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
    return json.loads(description[len(MARKER) :])
