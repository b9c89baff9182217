"""The answer-cache key of an adapter whose answer depends on the image and on the texts it
sends besides it (its prompts), with the checkpoint, revision, options and dtype the answer
cache adds itself. Used by the transformers detectors, YOLO and the chat models; torch-free.

Example: OWLv2 on a task of classes ``cat, dog`` sends ``"a photo of a cat"`` and ``"a photo
of a dog"``, so its key is ``("rf100vl", "2 classes", "cat", "dog", "a photo of a cat", "a photo
of a dog")``; asked where a cat is in a mosaic, ``("uouo", "cat", "a photo of a cat")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pytest_rf100vl.adapters.base import DetectionTask, GroundingQuery


class Told(Protocol):
    """A model named and told its task: an adapter, or the session's wrapper of any model."""

    name: str
    task: DetectionTask | None


def prompt_key(adapter: Told, query: GroundingQuery | None,
               prompt_texts: Callable[[GroundingQuery | None], tuple[str, ...]]) -> tuple[str, ...]:
    """What ``adapter``'s answer depends on besides the image, the checkpoint, its revision, the
    options and the dtype: for a detection task (``query`` is ``None``) its classes in order
    (they give the labels their meaning) and ``prompt_texts(None)``; for a UOUO question its
    target and ``prompt_texts(query)``."""
    if query is not None:
        return ("uouo", query.target, *prompt_texts(query))
    if adapter.task is None:
        raise RuntimeError(f"adapter {adapter.name!r}: set_task must be called before answer_key_parts")
    return ("rf100vl", f"{len(adapter.task.classes)} classes", *adapter.task.classes, *prompt_texts(None))


def no_prompt(query: GroundingQuery | None) -> tuple[str, ...]:
    """The prompt texts of a closed-set detector: none, as the classes (in the key's class list)
    and the weights say it all. ``prompt_key(adapter, query, no_prompt)`` is its key."""
    return ()
