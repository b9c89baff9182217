"""Any :class:`~pytest_rf100vl.adapters.base.Detector` run as a built-in is: a model written
with only ``set_task`` and ``predict`` (in a conftest, say) is wrapped here, so the session
gives it what it gives every model (the answer cache, resume, rows, throughput) without
the model writing another member (``docs/your-model.md``).

The wrapper reads the model's optional capabilities with ``isinstance``
(:class:`~pytest_rf100vl.adapters.base.Grounder`, ``Trainable``, ``Prompted``,
``Accounted``) and, outside them, only ``set_task``, ``predict``, ``info`` (a
:class:`~pytest_rf100vl.adapters.base.ModelInfo`, when the model has one) and ``close``
(:data:`READ`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rf100vl_hf.constants import PROMPT_MODES

from pytest_rf100vl.adapters.base import (
    Accounted,
    Adapter,
    Detections,
    DetectionTask,
    Detector,
    GroundingAnswer,
    GroundingQuery,
    Grounder,
    ImageItem,
    ModelInfo,
    Prompted,
    Trainable,
    TrainingData,
)
from pytest_rf100vl.adapters.keyed import prompt_key

if TYPE_CHECKING:
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.store import FitRecord, TrainedStore

READ = ("set_task", "predict", "info", "close")
"""The members of a hosted model read outside its capability protocols."""


def info_of(model: Detector, name: str, checkpoint: str | None, options: dict[str, Any]) -> ModelInfo:
    """The model's own ``info`` when it has one, else what its spec says of it."""
    info = getattr(model, "info", None)
    return info if isinstance(info, ModelInfo) else ModelInfo(name, checkpoint, None, dict(options))


class Hosted(Adapter):
    """A :class:`Detector` that is not an :class:`Adapter`, as the session runs it: named,
    identified and cached by its :class:`ModelInfo`, its capabilities passed through."""

    name = "hosted"
    prompt_modes = PROMPT_MODES  # every mode reaches the model, which refuses what it cannot take

    def __init__(self, model: Detector, info: ModelInfo, device: str = "cpu", dtype: str = "float32"):
        super().__init__(info.checkpoint, device, dtype, **info.options)
        self.model = model
        self.name = info.name
        self._info = info
        self.recipes: dict[str, Recipe] = dict(model.recipes) if isinstance(model, Trainable) else {}

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def revision(self) -> str | None:
        return self._info.revision

    @property
    def is_smoke(self) -> bool:
        return self._info.smoke

    def set_task(self, task: DetectionTask) -> None:
        super().set_task(task)
        self.model.set_task(task)

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        return self.model.predict(batch)

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        if isinstance(self.model, Grounder):
            return self.model.ground(batch, queries)
        return super().ground(batch, queries)

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...] | None:
        """The model's own texts (:class:`Prompted`), else the task or question it was told."""
        if isinstance(self.model, Prompted):
            return self.model.answer_key_parts(query)
        return prompt_key(self, query, self._told)

    def _told(self, query: GroundingQuery | None) -> tuple[str, ...]:
        """What the model was told besides the classes: the UOUO question, or the task's
        dataset (few-shot examples come from it), prompt mode and instructions."""
        if query is not None:
            return query.box_prompt, query.quadrant_prompt
        assert self.task is not None  # prompt_key refuses a model told no task
        task = self.task
        return (task.dataset, task.prompt, *(f"{name}: {text}" for name, text in sorted(task.instructions.items())),
                task.readme)

    def start_pair(self) -> None:
        if isinstance(self.model, Accounted):
            self.model.start_pair()

    def pair_columns(self) -> dict[str, Any]:
        return self.model.pair_columns() if isinstance(self.model, Accounted) else {}

    def fit(self, data: TrainingData, recipe: "Recipe", store: "TrainedStore") -> "FitRecord":
        if not isinstance(self.model, Trainable):
            return super().fit(data, recipe, store)
        return self.model.fit(data, recipe, store)

    def load_trained(self, store: "TrainedStore") -> None:
        if not isinstance(self.model, Trainable):
            return super().load_trained(store)
        return self.model.load_trained(store)

    def close(self) -> None:
        close = getattr(self.model, "close", None)
        if callable(close):
            close()


def hosted(model: object, name: str, checkpoint: str | None, options: dict[str, Any], device: str,
           dtype: str) -> Adapter:
    """``model`` as the session runs it: an :class:`Adapter` as it is, another
    :class:`Detector` wrapped; anything else is a ``TypeError`` naming what it lacks."""
    if isinstance(model, Adapter):
        return model
    if not isinstance(model, Detector):
        missing = [member for member in ("set_task", "predict") if not callable(getattr(model, member, None))]
        raise TypeError(f"model {name!r} ({type(model).__name__}) is not a detector: it has no "
                        f"{' and no '.join(missing)} (docs/your-model.md)")
    return Hosted(model, info_of(model, name, checkpoint, options), device, dtype)
