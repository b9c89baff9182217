"""The answer cache as the inference loop uses it: before a batch goes to the model, the
images already answered are taken from the cache; after the model answered, each answer is
stored. Only answers reach the cache: an image the model raised on is never stored, so it
is asked again on the next run (see :mod:`pytest_rf100vl.engine.answer_cache`). An answer
stored by the same pass is not taken back: a byte-identical copy of an image in one split
is asked like any other image, so a fresh run is never mistaken for a resumed one (its
timing rounds and answer counts stay those of every image)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from pytest_rf100vl.adapters.base import Detections, GroundingAnswer, GroundingQuery, ImageItem
from pytest_rf100vl.adapters.model import Model
from pytest_rf100vl.engine.answer_cache import AnswerCache, answer_from, key_for, payload_of

if TYPE_CHECKING:
    from pathlib import Path

A = TypeVar("A", Detections, GroundingAnswer)

CACHE_FILE = "answers.sqlite"
"""The cache's file in the ``cache`` folder (the loop key)."""


class PairAnswers(Generic[A]):
    """One pair's view of the cache: ``model``'s answers of type ``kind``, keyed on its
    :class:`~pytest_rf100vl.adapters.base.ModelInfo` and what it sends (:func:`key_for`)."""

    def __init__(self, cache: AnswerCache, model: Model, kind: type[A]):
        self.cache = cache
        self.model = model
        self.kind = kind
        self._keys: dict[int, str] = {}  # image id -> key, for the images looked up and not found
        self._task_parts: tuple[str, ...] | None = None  # the task's key parts, the same for every image
        self._stored: set[str] = set()  # the keys this pass stored: a duplicate image's, not a resumed answer

    def found(self, items: Sequence[ImageItem], queries: Sequence[GroundingQuery] | None = None) -> dict[int, A]:
        """Image id -> the cached answer, for the items that have one."""
        found: dict[int, A] = {}
        if queries is None and self._task_parts is None:
            self._task_parts = self.model.answer_key_parts(None)
        for item, query in zip(items, queries if queries is not None else [None] * len(items)):
            key = key_for(self.model, item.image, query, self._task_parts if query is None else None)
            payload = None if key in self._stored else self.cache.get(key)
            answer = answer_from(payload) if payload is not None else None
            if isinstance(answer, self.kind):
                found[item.image_id] = answer
            else:
                self._keys[item.image_id] = key
        return found

    def keep(self, item: ImageItem, answer: A) -> None:
        """Store the model's answer for ``item`` (looked up before and not found)."""
        key = self._keys.pop(item.image_id)
        self._stored.add(key)
        self.cache.put(key, payload_of(answer))

    def close(self) -> None:
        self.cache.close()


def open_answers(folder: "Path | None", model: Model, kind: type[A]) -> PairAnswers[A] | None:
    """The pair's answers in the cache of ``folder``; ``None`` when the cache is off or the
    model's answers cannot be cached (its registry entry says so: ``Entry.cached``)."""
    if folder is None or not model.entry.cached:
        return None
    return PairAnswers(AnswerCache(folder / CACHE_FILE), model, kind)
