"""Every model as the session runs it: a :class:`Model` built from the model's registry
:class:`~pytest_rf100vl.adapters.base.Entry` and the :class:`~pytest_rf100vl.adapters.base.Detector`
itself, built-ins and a conftest's model alike (``docs/your-model.md``). The session, the
inference loop, the answer cache and the training stage talk to the wrapper; the wrapper is
the one place that reads the model, and it reads only its capability protocols
(``Grounder``, ``Pipelined``, ``Trainable``, ``Prompted``, ``Accounted``, checked with
``isinstance``) and the members in :data:`READ`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from rf100vl_hf.specs import ModelSpec

from pytest_rf100vl.adapters.base import (
    Accounted,
    Adapter,
    Detections,
    DetectionTask,
    Detector,
    Entry,
    GroundingAnswer,
    GroundingQuery,
    Grounder,
    ImageItem,
    ModelInfo,
    Pipelined,
    Prompted,
    Trainable,
    TrainingData,
    best_boxes,
    check_task,
)
from pytest_rf100vl.adapters.keyed import prompt_key

if TYPE_CHECKING:
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.store import FitRecord, TrainedStore

READ = ("set_task", "predict", "info", "close", "describe", "answer_counts", "concurrency", "entry")
"""The members of a model the session reads outside its capability protocols (``entry`` of a
registered model's class: :meth:`Adapter.entry`, its registry entry). Only ``set_task`` and
``predict`` are required: the others have defaults."""


class Model:
    """``detector`` as the session runs it, with its registry ``entry``, the ``device``,
    ``dtype`` and ``device_map`` it was built for, the task it was last told and the hash of
    the fine-tuned weights it holds (``trained_weights``: ``None``, the checkpoint's own).
    ``info`` names a model that has no :class:`ModelInfo` of its own (by its spec)."""

    def __init__(self, entry: Entry, detector: Detector, device: str = "cpu", dtype: str = "float32",
                 device_map: str | None = None, info: ModelInfo | None = None):
        self.entry = entry
        self.detector = detector
        self.device = device
        self.dtype = dtype
        self.device_map = device_map
        self._info = info or ModelInfo(entry.name)
        self.task: DetectionTask | None = None
        self.trained_weights: str | None = None
        concurrency = getattr(detector, "concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise TypeError(f"model {entry.name!r}: concurrency must be a whole number of at least 1, "
                            f"not {concurrency!r}")
        self.concurrency = concurrency
        """How many calls may be in flight at once: above 1 (a model behind a server), the runner
        calls it one image per call from that many threads."""

    @property
    def info(self) -> ModelInfo:
        """The model's own :class:`ModelInfo` (read each time: a replayed file's depends on the
        task), else the one it was named by."""
        info = getattr(self.detector, "info", None)
        return info if isinstance(info, ModelInfo) else self._info

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def recipes(self) -> dict[str, "Recipe"]:
        """The recipes it can be fine-tuned by (none: it is scored as it comes)."""
        return dict(self.detector.recipes) if isinstance(self.detector, Trainable) else {}

    @property
    def pipelined(self) -> Pipelined | None:
        """The model, when the runner may overlap its three stages across batches: one called a
        batch at a time, on one device."""
        if isinstance(self.detector, Pipelined) and self.concurrency <= 1 and self.device_map is None:
            return self.detector
        return None

    def set_task(self, task: DetectionTask) -> None:
        check_task(self.name, self.entry.prompt_modes, task)
        self.detector.set_task(task)
        self.task = task

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        return self.detector.predict(batch)

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """Its own answers (:class:`Grounder`), else its best box for each target."""
        if isinstance(self.detector, Grounder):
            return self.detector.ground(batch, queries)
        return best_boxes(self.detector, batch, queries)

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...] | None:
        """What its answer depends on besides the image and :attr:`info`: the texts it says it
        sends (:class:`Prompted`), else the task or question it was told."""
        if isinstance(self.detector, Prompted):
            return self.detector.answer_key_parts(query)
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

    def answer_counts(self) -> dict[str, int]:
        """Counts of what the model met in its answers since it was built (unreadable answers,
        unknown labels...); each row gets what its pair added."""
        counts = getattr(self.detector, "answer_counts", None)
        return counts() if callable(counts) else {}

    def start_pair(self) -> None:
        if isinstance(self.detector, Accounted):
            self.detector.start_pair()

    def pair_columns(self) -> dict[str, Any]:
        return self.detector.pair_columns() if isinstance(self.detector, Accounted) else {}

    def describe(self) -> dict[str, Any]:
        """What ran, for the row and the predictions file: the model, where it ran, and what it
        says of itself (``describe()``, when it has one)."""
        info = self.info
        described = getattr(self.detector, "describe", None)
        return {"model": info.name, "checkpoint": info.checkpoint, "revision": info.revision, "device": self.device,
                "dtype": self.dtype, "smoke": info.smoke, **(described() if callable(described) else {})}

    def fit(self, data: TrainingData, recipe: "Recipe", store: "TrainedStore") -> "FitRecord":
        if not self.recipes:
            raise NotImplementedError(f"adapter {self.name!r} cannot be fine-tuned")
        return self.detector.fit(data, recipe, store)  # type: ignore[union-attr]

    def use_trained(self, store: "TrainedStore") -> None:
        """Take the finished fit in ``store`` as the model's weights, whether it was fitted just now
        or by an earlier run: what is scored is what the store holds, and the weights' hash keys
        the cached answers apart from the checkpoint's own (:attr:`trained_weights`)."""
        record = store.record()
        if record is None:
            raise ValueError(f"{store.folder} holds no finished fit")
        if not self.recipes:
            raise NotImplementedError(f"adapter {self.name!r} cannot be fine-tuned")
        self.detector.load_trained(store)  # type: ignore[union-attr]
        self.trained_weights = record.weights_sha256

    def close(self) -> None:
        close = getattr(self.detector, "close", None)
        if callable(close):
            close()


def entry_of(spec: ModelSpec, made: object) -> Entry:
    """The registry entry of a model a hook made: its class's (an :class:`Adapter`), else the
    defaults under the spec's name."""
    return type(made).entry() if isinstance(made, Adapter) else Entry(spec.name)


def hosted(made: object, spec: ModelSpec, device: str, dtype: str) -> Model:
    """A model a ``pytest_rf100vl_make_adapter`` hook made, as the session runs it; anything
    without ``set_task`` and ``predict`` is a ``TypeError`` naming what it lacks."""
    if not isinstance(made, Detector):
        missing = [member for member in ("set_task", "predict") if not callable(getattr(made, member, None))]
        raise TypeError(f"model {spec.name!r} ({type(made).__name__}) is not a detector: it has no "
                        f"{' and no '.join(missing)} (docs/your-model.md)")
    options = spec.option_values
    return Model(entry_of(spec, made), made, device, dtype, info=ModelInfo(spec.name, spec.checkpoint, None, options))


def as_model(model: Model | Adapter) -> Model:
    """``model`` as the loop runs it: the Python API's edge, where a built adapter is run
    directly (the session builds its :class:`Model` itself). One adapter has one wrapper, whose
    task and fine-tuned weights follow the adapter's; its device, dtype and device map carry over."""
    if isinstance(model, Model):
        return model
    wrapped = _wrappers.get(model)
    if wrapped is None:
        wrapped = _wrappers[model] = Model(type(model).entry(), model, model.device, model.dtype,
                                           getattr(model, "device_map", None))
    wrapped.task, wrapped.trained_weights = model.task, model.trained_weights
    return wrapped


_wrappers: "weakref.WeakKeyDictionary[Adapter, Model]" = weakref.WeakKeyDictionary()
