"""Adapters that say what they send besides the image, so their answers can be cached.

Shared by the transformers adapters (:class:`~pytest_rf100vl.adapters.hf.HFDetector`) and the
models behind a server (:mod:`~pytest_rf100vl.adapters.served_chat`); torch-free.
"""

from __future__ import annotations

from abc import abstractmethod

from pytest_rf100vl.adapters.base import Adapter, GroundingQuery


class PromptKeyedAdapter(Adapter):
    """An adapter whose answer depends on the image and on :meth:`prompt_texts` alone (with
    the checkpoint, revision, options and dtype the answer cache adds itself)."""

    @abstractmethod
    def prompt_texts(self, query: GroundingQuery | None) -> tuple[str, ...]:
        """What the model is sent besides the image: for the current task (``query`` is
        ``None``) or for a UOUO question. Read by :meth:`answer_key_parts`."""

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...]:
        """What an answer depends on besides the image, the checkpoint, its revision, the
        options and the dtype: for a detection task its classes in order (they give the
        labels their meaning) and the prompts built from them; for a UOUO question its
        target and the prompts. The answer cache keys each answer on it."""
        if query is not None:
            return ("uouo", query.target, *self.prompt_texts(query))
        if self.task is None:
            raise RuntimeError(f"adapter {self.name!r}: set_task must be called before answer_key_parts")
        return ("rf100vl", f"{len(self.task.classes)} classes", *self.task.classes, *self.prompt_texts(None))
