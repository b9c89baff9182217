"""Answers of slow models kept per image (per mosaic for UOUO), so a killed run resumes at its
first unanswered image instead of image 0.

An answer is keyed by everything that changes it: the model's
:class:`~pytest_rf100vl.adapters.base.ModelInfo` (name, checkpoint, revision, options), the
dtype, the fine-tuned weights it holds, what it sends besides the image (its
:class:`~pytest_rf100vl.adapters.base.Prompted` texts for the current task or UOUO question,
or else the task or question it was told: :meth:`Model.answer_key_parts`) and the image's
pixels. A new checkpoint revision, prompt or option is a new key; nothing
is ever invalidated in place.

The store is one SQLite file in WAL mode. Each answer is written in its own transaction, so
a process killed mid-write leaves the last committed answer intact and the torn one absent;
each record also carries a checksum of its key and payload, checked on every read, and a
record that fails it is a miss, never served. Several processes (pytest-xdist workers) may
share one file: each opens its own :class:`AnswerCache`, and writers wait for one another
(``timeout``). A connection is not shared across ``fork``.

Text in an answer (a grounding model's raw reply, a transcript) is stored scrubbed of the session's
secrets (:mod:`rf100vl_hf.redact`). Only answers are stored, never failures: :meth:`AnswerCache.put` refuses an exception or
anything that is not an answer, and the runner calls it only for images the model answered
(an image it raised on is asked again on the next run).
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xxhash
from filelock import FileLock

from rf100vl_hf.errors import DataError
from rf100vl_hf.redact import scrub

from pytest_rf100vl.adapters.base import Detections, GroundingAnswer
from pytest_rf100vl.adapters.model import as_model

if TYPE_CHECKING:
    from PIL import Image

    from pytest_rf100vl.adapters.base import Adapter, GroundingQuery
    from pytest_rf100vl.adapters.model import Model

KEY_VERSION = 1
"""Part of every key: bumped when what a key covers changes, so old records are simply not found."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS answers ("
    "key TEXT PRIMARY KEY, payload BLOB NOT NULL, checksum TEXT NOT NULL, created REAL NOT NULL)"
)
_ARRAY = "__ndarray__"


def image_digest(image: Image.Image | bytes) -> str:
    """A content hash of an image: of its decoded pixels (mode, size and bytes), or of raw
    file bytes. The same pixels give the same digest whatever file they came from."""
    hasher = xxhash.xxh3_128()
    if isinstance(image, (bytes, bytearray, memoryview)):
        hasher.update(b"bytes\0")
        hasher.update(image)
    else:
        hasher.update(f"pixels\0{image.mode}\0{image.width}x{image.height}\0".encode())
        hasher.update(image.tobytes())
    return hasher.hexdigest()


def answer_key(
    *,
    model: str,
    checkpoint: str | None,
    revision: str | None,
    options: Mapping[str, Any],
    dtype: str,
    prompt: Sequence[str],
    image: Image.Image | bytes,
) -> str:
    """The key of one answer: a hash of everything that changes it (see the module docstring)."""
    identity = {
        "version": KEY_VERSION,
        "model": model,
        "checkpoint": checkpoint,
        "revision": revision,
        "options": {str(k): options[k] for k in sorted(options, key=str)},
        "dtype": dtype,
        "prompt": list(prompt),
        "image": image_digest(image),
    }
    text = json.dumps(identity, sort_keys=True, default=repr, ensure_ascii=False)
    return xxhash.xxh3_128_hexdigest(text.encode())


def key_for(
    adapter: "Model | Adapter",
    image: Image.Image | bytes,
    query: GroundingQuery | None = None,
    parts: tuple[str, ...] | None = None,
) -> str:
    """:func:`answer_key` of the model's answer for ``image`` (its current task, or the UOUO
    ``query``), from its :class:`~pytest_rf100vl.adapters.base.ModelInfo` and what it sends;
    ``TypeError`` for a model whose answers cannot be cached (it does not say what it sends:
    its ``answer_key_parts`` is ``None``). ``parts``: the model's ``answer_key_parts`` when the
    caller already has them (they are the same for every image of a task, and can be costly:
    few-shot images are hashed)."""
    model = as_model(adapter)
    parts = parts if parts is not None else model.answer_key_parts(query)
    if parts is None:
        raise TypeError(f"adapter {model.name!r} does not say what it sends (answer_key_parts): not cacheable")
    info = model.info
    return answer_key(
        model=info.name,
        checkpoint=info.checkpoint,
        revision=info.revision if model.trained_weights is None
        else f"{info.revision}+weights:{model.trained_weights}",
        options=info.options,
        dtype=model.dtype,
        prompt=parts,
        image=image,
    )


def _plain(value: Any, where: str) -> Any:
    """``value`` as JSON-ready data; numpy arrays are tagged with their dtype and shape."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {_ARRAY: base64.b64encode(data.tobytes()).decode(), "dtype": data.dtype.str, "shape": list(data.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, str):  # a model's raw answer may echo what it was sent: never a secret
        return scrub(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        if _ARRAY in value or not all(isinstance(k, str) for k in value):
            raise TypeError(f"{where}: answer mappings need string keys other than {_ARRAY!r}")
        return {k: _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"{where}: a {type(value).__name__} cannot be stored in the answer cache")


def _restored(value: Any) -> Any:
    if isinstance(value, dict):
        if _ARRAY in value:
            array = np.frombuffer(base64.b64decode(value[_ARRAY]), dtype=np.dtype(value["dtype"]))
            return array.reshape(value["shape"]).copy()
        return {k: _restored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restored(v) for v in value]
    return value


def _checksum(key: str, blob: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(key.encode() + b"\0" + blob)


def payload_of(answer: Detections | GroundingAnswer) -> dict[str, Any]:
    """An adapter's answer for one image as a cache payload, with its transcript when it has
    one (a model that answers in text), so a run answered from the cache still logs it."""
    if isinstance(answer, Detections):
        payload = {
            "kind": "detections",
            "boxes": np.asarray(answer.boxes, dtype=np.float64).reshape(-1, 4),
            "scores": np.asarray(answer.scores, dtype=np.float64).reshape(-1),
            "labels": np.asarray(answer.labels, dtype=np.int64).reshape(-1),
        }
    elif isinstance(answer, GroundingAnswer):
        box = None if answer.box is None else [float(v) for v in answer.box]
        payload = {"kind": "grounding", "box": box, "quadrant": answer.quadrant, "raw": dict(answer.raw)}
    else:
        raise TypeError(f"only answers are cached, not a {type(answer).__name__}")
    if answer.transcript is not None:
        payload["transcript"] = answer.transcript
    return payload


def answer_from(payload: Mapping[str, Any]) -> Detections | GroundingAnswer:
    """The answer a payload of :func:`payload_of` holds (an answer stored before transcripts
    were kept has none)."""
    transcript = payload.get("transcript")
    if payload.get("kind") == "detections":
        return Detections(payload["boxes"], payload["scores"], payload["labels"], transcript)
    if payload.get("kind") == "grounding":
        box = payload["box"]
        return GroundingAnswer(None if box is None else tuple(box), payload["quadrant"], dict(payload["raw"]),
                               transcript)
    raise ValueError(f"not an answer payload (kind {payload.get('kind')!r})")


class AnswerCache:
    """One answer cache file, opened by one process (see the module docstring)."""

    def __init__(self, path: str | Path, timeout: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # switching a new file to WAL and creating its table take locks SQLite's busy wait does
            # not cover: processes opening one file at once take turns, under a file lock
            with FileLock(str(self.path) + ".lock", timeout=timeout):
                self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: a killed process loses no commit
                self._db.execute(_SCHEMA)
        except sqlite3.DatabaseError as error:
            raise DataError(
                self.path, "answer cache", f"not a usable SQLite answer cache ({error}); delete it to start afresh"
            ) from None

    key = staticmethod(answer_key)

    def get(self, key: str) -> dict[str, Any] | None:
        """The payload stored under ``key``; ``None`` when absent or when its checksum fails."""
        row = self._db.execute("SELECT payload, checksum FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None or _checksum(key, row[0]) != row[1]:
            return None
        try:
            return _restored(json.loads(row[0]))
        except (ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, payload: Mapping[str, Any]) -> None:
        """Store an answer (a mapping of numbers, strings, lists, ``None`` and numpy arrays),
        committed before returning. An exception or anything else is refused: a failure is
        never cached."""
        if not isinstance(payload, Mapping):
            raise TypeError(f"only answers are cached, not a {type(payload).__name__}")
        blob = json.dumps(_plain(payload, "payload"), allow_nan=True).encode()
        self._db.execute(
            "INSERT OR REPLACE INTO answers (key, payload, checksum, created) VALUES (?, ?, ?, ?)",
            (key, blob, _checksum(key, blob), time.time()),
        )

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> AnswerCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
