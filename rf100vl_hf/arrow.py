"""A loaded split's columns read as one Arrow table.

``dataset[column]`` in datasets 5 is a lazy ``Column`` that copies the dataset's features on
each access and formats its values row by row; a pair reads the same few columns of its split
at every stage (image ids, file names, sizes, boxes), so it reads them here, at once, with no
per-row formatting (``docs/scale.md``: what a pair costs besides the model and the metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa


def arrow_columns(dataset: "datasets.Dataset", columns: Sequence[str]) -> "pa.Table":
    """``columns`` of ``dataset`` as an Arrow table in its row order (a selection such as
    ``select(range(n))`` applied), values as stored: an image column is its ``{bytes, path}``
    struct, undecoded.

    The rows are those ``dataset.with_format("arrow", columns=...)[:]`` gives, taken by the
    same ``query_table``; the dataset is not copied to get them (``with_format`` deep-copies it,
    0.5-5 ms, against 0.01 ms here)."""
    from datasets.formatting import query_table

    return query_table(dataset.data.select(list(columns)), slice(0, len(dataset)), indices=dataset._indices)
