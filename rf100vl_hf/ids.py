"""The one rule for ids (of images, annotations and categories), wherever they are read: an
export's annotation files, a COCO dict given to the metric, a replayed results file.

An id is an integer that fits in 64 bits (the int64 columns it is stored in). A float with
an integral value (``3.0``, as numpy arrays and some JSON writers give) is read as that
integer and counted: pycocotools keys its indexes by Python equality, where ``3.0 == 3``,
so both backends score it as the integer. Everything else is refused with the file and the
field: a string, even ``"3"`` (pycocotools takes ``"3"`` and ``3`` for two different ids
where faster-coco-eval takes them for one, so a score would depend on the backend), a
boolean, a fraction, NaN or infinity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rf100vl_hf.errors import DataError, shown

ID_LIMIT = 2**63
"""Ids lie in ``[-ID_LIMIT, ID_LIMIT)``: they are stored as int64."""


def read_id(value: Any, path: str | Path, field: str) -> tuple[int, bool]:
    """``value`` as an id, and whether it was written as a float (see the module docstring)."""
    note = ""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        number, was_float = int(value), False
    elif isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        number, was_float = int(value), True
    else:
        if isinstance(value, str):
            note = " (a string: pycocotools takes \"1\" and 1 for different ids; write ids as numbers)"
        raise DataError(path, field, f"expected an integer id, found {shown(value)}{note}")
    if not -ID_LIMIT <= number < ID_LIMIT:
        raise DataError(path, field, f"{shown(value)} does not fit in 64 bits")
    return number, was_float


def id_column(values: Sequence[Any] | np.ndarray, path: str | Path, where: str) -> tuple[np.ndarray, int]:
    """Ids as an int64 array, and how many were written as floats; ``where`` names a value's
    field with ``{}`` for its index.

    A float array (a column of an ``(N, 7)`` predictions array) is floats by its format:
    its integral values are read without being counted.
    """
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        whole = np.isfinite(values) & (values == np.round(values)) & (values >= -ID_LIMIT) & (values < ID_LIMIT)
        bad = np.flatnonzero(~whole)
        if bad.size:
            read_id(values[bad[0]].item(), path, where.format(bad[0]))
        return values.astype(np.int64), 0
    ids, floats = [], 0
    for index, value in enumerate(values):
        number, was_float = read_id(value, path, where.format(index))
        ids.append(number)
        floats += was_float
    return np.array(ids, dtype=np.int64), floats
