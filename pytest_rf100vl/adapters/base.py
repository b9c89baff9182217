"""The one contract every model meets (the README's "Models"; docs/architecture.md).

An adapter is built from a spec ``NAME[:CHECKPOINT_OR_PATH]``, told the task once per
dataset (:meth:`Adapter.set_task`), then called on batches of RGB images. It returns
boxes in pixels of the image it was given, as ``xyxy``; the runner converts, clips and
caps them in one place (:func:`rf100vl_hf.boxes.sanitize_detections`), so adapters stay
thin and cannot differ in how they treat bad output.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from rf100vl_hf.arguments import typed_option
from rf100vl_hf.constants import PROMPT_MODES
from rf100vl_hf.paths import cache_home
from rf100vl_hf.redact import url_secrets

if TYPE_CHECKING:
    from rf100vl_hf.training.recipe import Recipe
    from rf100vl_hf.training.samples import Sample
    from rf100vl_hf.training.store import FitRecord, TrainedStore


@dataclass(frozen=True)
class FewShotExample:
    """One annotated image of the ``fewshot_10`` split, for image-conditioned prompting."""

    image: Image.Image  # RGB
    boxes: np.ndarray  # (N, 4) xyxy pixels
    labels: np.ndarray  # (N,) class indices


@dataclass(frozen=True)
class ImageItem:
    """One image of a batch: RGB pixels in the displayed frame, and its identity in the split.
    ``data`` is the file as stored (``None`` for an image made in memory): a model served over
    HTTP can be sent those bytes instead of a re-encoding."""

    image: Image.Image
    image_id: int
    file_name: str
    data: bytes | None = None


Transcript = list[dict[str, Any]]
"""What a model that answers in text was asked about one image and what it wrote: one JSON-ready
record per question (:mod:`~pytest_rf100vl.adapters.text_answers` makes them), for the samples
log (the report key ``log-samples``). It travels with the answer, into the answer cache too."""


@dataclass
class Detections:
    """Per-image output: ``xyxy`` pixel boxes, scores and class indices into ``task.classes``;
    ``transcript`` for a model that answers in text (``None`` for any other)."""

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    transcript: Transcript | None = None

    @classmethod
    def empty(cls) -> "Detections":
        return cls(np.zeros((0, 4)), np.zeros((0,)), np.zeros((0,), dtype=np.int64))

    @classmethod
    def concatenate(cls, parts: list[Detections]) -> Detections:
        """One image's detections gathered from several passes (one per caption, say), in order."""
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([np.asarray(p.boxes, dtype=np.float64).reshape(-1, 4) for p in parts]),
            np.concatenate([np.asarray(p.scores, dtype=np.float64).reshape(-1) for p in parts]),
            np.concatenate([np.asarray(p.labels, dtype=np.int64).reshape(-1) for p in parts]),
        )

    def check(self, num_classes: int) -> None:
        """Raise ``ValueError`` unless this is well-formed output for ``num_classes`` classes:
        ``(N, 4)`` floating boxes, ``(N,)`` floating scores, ``(N,)`` integer labels in range."""
        boxes, scores, labels = (np.asarray(a) for a in (self.boxes, self.scores, self.labels))
        n = len(scores)
        failures = {
            f"boxes of shape {boxes.shape}, expected ({n}, 4)": boxes.shape != (n, 4),
            f"scores of shape {scores.shape}, expected ({n},)": scores.shape != (n,),
            f"labels of shape {labels.shape}, expected ({n},)": labels.shape != (n,),
            f"boxes of dtype {boxes.dtype}": not np.issubdtype(boxes.dtype, np.floating),
            f"scores of dtype {scores.dtype}": not np.issubdtype(scores.dtype, np.floating),
            f"labels of dtype {labels.dtype}": not np.issubdtype(labels.dtype, np.integer),
        }
        problems = [message for message, failed in failures.items() if failed]
        if not problems and n and (labels.min() < 0 or labels.max() >= num_classes):
            problems.append(f"labels outside 0..{num_classes - 1}: {sorted(set(labels.tolist()))}")
        if problems:
            raise ValueError("malformed detections: " + "; ".join(problems))


@dataclass(frozen=True)
class DetectionTask:
    """What a detector is told once per dataset. Category 0 never reaches here, except as the
    first class of a zero-shot ``names`` task of the ``rf-scripts`` protocol, which prompts it as
    Roboflow's scripts do (``category_ids`` then starts with 0)."""

    dataset: str
    classes: list[str]
    split: str = "test"
    prompt: str = "names"  # one of PROMPT_MODES
    instructions: dict[str, str] = field(default_factory=dict)  # class -> description + instructions
    readme: str = ""
    """The annotator instructions file as written (``README.dataset.txt``), in instruction modes:
    what the paper's multi-class prompt appends (``docs/prompts.md``)."""
    fewshot: tuple[FewShotExample, ...] = ()
    category_ids: tuple[int, ...] = ()  # the export's category id of each class (for replayed files)
    ground_truth: dict[int, Detections] | None = None  # image id -> boxes; only for needs_ground_truth
    image_ids: tuple[int, ...] = ()  # the split's image ids, so replayed files can name unknown images


@dataclass(frozen=True)
class TrainingData:
    """What :meth:`Adapter.fit` trains on: the training split's annotated images, the validation
    split's, and for a semi-supervised split the rest of train, whose labels it may not use."""

    split: str  # fewshot_10, semisup_10, train...
    train: Sequence["Sample"]
    validation: Sequence["Sample"]
    task: DetectionTask  # the classes, in label order
    unlabelled: Sequence["Sample"] = ()


@dataclass(frozen=True)
class GroundingQuery:
    """A UOUO question about one mosaic: where is ``target``, and in which quadrant."""

    target: str
    box_prompt: str
    quadrant_prompt: str


@dataclass
class GroundingAnswer:
    """A model's answer: a box in pixels and/or a quadrant word; ``None`` where it gave none
    that could be parsed. ``raw`` keeps the text of models that answer in text, and
    ``transcript`` what they were asked and how each reply was read."""

    box: tuple[float, float, float, float] | None
    quadrant: str | None
    raw: dict[str, str] = field(default_factory=dict)
    transcript: Transcript | None = None


@dataclass(frozen=True)
class ModelInfo:
    """What identifies a model's answers: the one source of a row's model columns, the identity
    a row is reused on, the trained-weights key and the answer-cache key, so that no model
    has to keep several members in step (``docs/your-model.md``). ``options`` are those its
    answers depend on; ``smoke`` marks random weights (scores that mean nothing)."""

    name: str
    checkpoint: str | None = None
    revision: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    smoke: bool = False


@runtime_checkable
class Detector(Protocol):
    """A model, as the plugin needs it: told the task once per dataset, then asked for the
    detections of batches of images. Everything else is an optional capability below, which
    the session detects with ``isinstance``; caching, resume, rows and throughput come from
    the plugin (``docs/your-model.md``)."""

    def set_task(self, task: DetectionTask) -> None:
        """Told once per dataset, before any batch."""

    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        """``xyxy`` pixel boxes, scores and class indices for each image of the batch, in order."""


@runtime_checkable
class Grounder(Protocol):
    """A model that answers UOUO's questions itself (otherwise its best box for the target's
    name is its answer, and the quadrant is read from the box)."""

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """One answer per image and question, in order."""


@runtime_checkable
class Pipelined(Protocol):
    """A detector whose :meth:`~Adapter.predict` is three stages the runner can overlap across
    batches, so that a GPU never waits for the host (``docs/scale.md``, "Feeding the GPU").
    ``predict(batch)`` must equal ``collect(launch(prepare(batch)))``; the runner calls the
    stages of different batches from different threads, ``prepare`` on its own.

    Example: ``prepare`` returns the batch's pixels on the device, ``launch`` the model's raw
    outputs (queued there, nothing waits for them), ``collect`` the detections, read back in
    one copy (:class:`~pytest_rf100vl.adapters.pipelined.PipelinedDetector` does this for the
    transformers detectors)."""

    def prepare(self, batch: list[ImageItem]) -> Any:
        """The model's inputs for ``batch``, on its device."""

    def launch(self, prepared: Any) -> Any:
        """The model's outputs for prepared inputs, without waiting for the device."""

    def collect(self, launched: Any) -> list[Detections]:
        """Detections of each image of the batch, in order."""


@runtime_checkable
class Trainable(Protocol):
    """A model that can be fine-tuned (``--rf100vl-train``): its recipes by name, and the two
    stages of the fit stage (``docs/training.md``)."""

    recipes: dict[str, "Recipe"]

    def fit(self, data: TrainingData, recipe: "Recipe", store: "TrainedStore") -> "FitRecord":
        """Fine-tune on ``data`` by ``recipe``, checkpointing into ``store``."""

    def load_trained(self, store: "TrainedStore") -> None:
        """Load the weights of a finished fit in ``store``."""


@runtime_checkable
class Prompted(Protocol):
    """A model that says what it sends besides the image: the answer cache keys each answer on
    these texts. Without it, an answer is keyed on the task the model was told."""

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...] | None:
        """The prompt texts and classes of the current task, or of a UOUO ``query``."""


@runtime_checkable
class Accounted(Protocol):
    """A model that counts what each pair cost it (requests, tokens, money): its columns are
    added to the pair's row."""

    def start_pair(self) -> None:
        """Start counting for the next pair."""

    def pair_columns(self) -> dict[str, Any]:
        """The columns counted since :meth:`start_pair`."""


def url_credentials(options: dict[str, Any]) -> tuple[str, ...]:
    """The credentials of every URL among ``options``' values: what no text the plugin writes may show."""
    return tuple(secret for value in options.values() if isinstance(value, str) and "://" in value
                 for secret in url_secrets(value))


def accept_any(options: dict[str, Any]) -> None:
    """The options check of a model that declares none: every option reaches the model."""


@dataclass(frozen=True)
class Entry:
    """A model family's entry in the registry: what the session knows of it before a model
    is built, so that nothing it decides before (or besides) inference reads the model
    (``docs/architecture.md``, the adapters). A built-in's comes from its class
    (:meth:`Adapter.entry`); a model made by the ``pytest_rf100vl_make_adapter`` hook gets
    the defaults, named by its spec.

    ``planned`` gives the :class:`ModelInfo` a pair of ``(checkpoint, options, dataset, split)``
    will record, worked out without building the model (``None``: it cannot be, and rows are
    matched on the spec and options as given); ``check`` raises ``TypeError`` or ``ValueError``
    on options the model refuses; ``secrets`` lists what options hold or lead to that no text
    may show; ``cached``: its answers may be kept in the answer cache."""

    name: str
    default_checkpoint: str | None = None
    prompt_modes: tuple[str, ...] = PROMPT_MODES
    tasks: tuple[str, ...] = ("rf100vl", "uouo")
    needs_ground_truth: bool = False
    """Only the oracle: the kind tells it the task with its ground truth."""
    transformers_model: bool = False
    """It runs a transformers model: it takes ``device_map``, ``attention`` and ``compile``."""
    submitted_output: bool = False
    """Its output is a submission scored exactly as submitted (no clipping to the image)."""
    repeatable: bool = True
    """The runner may run it again over a split too small to time (answers discarded)."""
    answers_in_text: bool = False
    """It answers in text: its transcripts go to the samples log (``--rf100vl-log-samples``)."""
    cached: bool = True
    default_recipes: Mapping[str, str] = field(default_factory=dict)
    """The recipe each regime uses unless ``--rf100vl-recipe`` names another."""
    recipe_fields: frozenset[str] | None = None
    """The recipe fields its ``fit`` uses (``None``: every field); setting another is refused."""
    training_libraries: tuple[str, ...] = ("torch", "transformers")
    """The packages its ``fit`` trains with: their versions key the trained weights."""
    recipes: Mapping[str, "Recipe"] = field(default_factory=dict)
    """Its recipes, known before it is built (a hook-made model's are read once built)."""
    check: Callable[[dict[str, Any]], None] = accept_any
    secrets: Callable[[dict[str, Any]], tuple[str, ...]] = url_credentials
    planned: Callable[[str | None, dict[str, Any], str, str], ModelInfo] | None = None


def check_task(name: str, prompt_modes: tuple[str, ...], task: DetectionTask) -> None:
    """Refuse a task with no classes, or in a prompt mode the model does not take."""
    if not task.classes:
        raise ValueError(f"adapter {name!r} was given no classes for dataset {task.dataset!r}")
    if task.prompt not in prompt_modes:
        raise ValueError(
            f"adapter {name!r} does not support prompt mode {task.prompt!r} "
            f"(supported: {', '.join(prompt_modes)})"
        )


def best_boxes(detector: Detector, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
    """UOUO answered by a detector: its best box for each question's target (the scorer
    reads the quadrant from the box centre)."""
    answers = []
    for item, query in zip(batch, queries):
        detector.set_task(DetectionTask(dataset="uouo", classes=[query.target]))
        (detections,) = detector.predict([item])
        if len(detections.scores) == 0:
            answers.append(GroundingAnswer(None, None))
            continue
        best = int(np.argmax(detections.scores))
        answers.append(GroundingAnswer(tuple(float(v) for v in detections.boxes[best]), None))
    return answers


class Adapter(ABC):
    """Base class of all adapters. Subclasses set ``name`` and ``default_checkpoint``."""

    name: ClassVar[str]
    default_checkpoint: ClassVar[str | None] = None
    prompt_modes: ClassVar[tuple[str, ...]] = ("names",)
    needs_ground_truth: ClassVar[bool] = False  # only the oracle: the runner fills task.ground_truth
    transformers_model: ClassVar[bool] = False
    """True when the adapter runs a transformers model: it takes ``device_map`` (a model spread
    over devices by accelerate), ``attention`` (the attention implementation) and ``compile``."""
    submitted_output: ClassVar[bool] = False
    """True when the output is a submission scored exactly as submitted (replayed files): the
    runner then changes nothing pycocotools would not (no clipping to the image)."""
    tasks: ClassVar[tuple[str, ...]] = ("rf100vl", "uouo")
    """The benchmarks the adapter answers: ``rf100vl`` (:meth:`predict`), ``uouo`` (:meth:`ground`).
    The plugin leaves the other benchmark's pairs out, with the reason in its summary."""
    option_defaults: ClassVar[dict[str, Any] | None] = None
    """The options the adapter accepts, with their defaults; ``None`` when it does not declare
    them (then nothing can check an option before the model is built). Options given as text
    are converted to the type of their default (:func:`typed_option`)."""
    repeatable: ClassVar[bool] = True
    """Whether the runner may run the model again over a split too small to time (answers
    discarded): ``False`` for a model billed per request, a replayed file, or one whose throughput
    means nothing (the oracle)."""
    transport_options: ClassVar[frozenset[str]] = frozenset()
    """Options that change how answers are fetched, not what they are (concurrency, time-outs,
    retries, spending caps, prices): left out of answer-cache keys and of the identity a row is
    reused on (:meth:`identity_options`), so raising a cap or a time-out re-asks nothing."""
    concurrency: int = 1
    """How many model calls may be in flight at once. Above 1 (a model behind a server), the
    runner calls :meth:`predict` / :meth:`ground` with one image per call from that many
    threads, taking answers as they complete, so the adapter must be thread-safe there."""

    recipes: ClassVar[dict[str, "Recipe"]] = {}
    """The recipes the adapter can be fine-tuned by (name -> default hyper-parameters); empty: it
    is scored as it comes and cannot be trained (``--rf100vl-train`` leaves its pairs out)."""
    default_recipes: ClassVar[dict[str, str]] = {}
    """The recipe each regime (``few-shot``, ``semi-supervised``, ``fully-supervised``) uses
    unless the training key ``recipe`` names another."""
    recipe_fields: ClassVar[frozenset[str] | None] = None
    """The recipe fields :meth:`fit` uses, when it trains with another library's trainer (``None``:
    every field, the project's own loop). Setting any other with ``--rf100vl-train-option`` is
    refused, so that a row never records a hyper-parameter nothing applied; ``seed`` and the
    recipe's ``extra`` keys are always the adapter's own."""
    training_libraries: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    """The packages :meth:`fit` trains with: their versions key the trained weights, so an
    upgrade trains again rather than reusing weights another version made."""

    def __init__(self, checkpoint: str | None = None, device: str = "cpu", dtype: str = "float32", **options: Any):
        self.check_options(options)
        self.checkpoint = checkpoint or self.default_checkpoint
        self.device = device
        self.dtype = dtype
        self.options = self.resolved_options(options)
        self.task: DetectionTask | None = None
        self.trained_weights: str | None = None
        """The sha256 of the fine-tuned weights :meth:`load_trained` loaded (``None``: the
        checkpoint's own)."""

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Raise ``TypeError`` naming the options ``option_defaults`` does not declare, so a
        typo is an error rather than a silently ignored setting (unchecked when undeclared)."""
        if cls.option_defaults is None:
            return
        unknown = sorted(set(options) - set(cls.option_defaults))
        if unknown:
            raise TypeError(
                f"adapter {cls.name!r} got unknown option(s) {', '.join(unknown)} "
                f"(accepted: {', '.join(cls.option_defaults) or 'none'})"
            )

    @classmethod
    def entry(cls) -> Entry:
        """The class's declarations as its registry :class:`Entry`: all the session reads of a
        built-in besides the model it builds."""
        name = getattr(cls, "name", cls.__name__)  # a class that only lists itself may leave it unset
        return Entry(name, cls.default_checkpoint, cls.prompt_modes, cls.tasks, cls.needs_ground_truth,
                     cls.transformers_model, cls.submitted_output, cls.repeatable, answers_in_text=False,
                     cached=cls.answer_key_parts is not Adapter.answer_key_parts,
                     default_recipes=cls.default_recipes, recipe_fields=cls.recipe_fields,
                     training_libraries=cls.training_libraries, recipes=cls.recipes, check=cls.check_options,
                     secrets=cls.secrets, planned=cls.planned_info)

    @classmethod
    def secrets(cls, options: dict[str, Any]) -> tuple[str, ...]:
        """What ``options`` hold or lead to that no text the plugin writes may show (the plugin
        tells the session's scrubber, :mod:`rf100vl_hf.redact`, before it prints anything): by
        default the credentials of every URL among them."""

        return url_credentials(options)

    @classmethod
    def resolved_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """Every declared option with its default, overridden by ``options`` in the defaults' types."""
        defaults = cls.option_defaults or {}
        return {**defaults, **{key: typed_option(key, value, defaults.get(key)) for key, value in options.items()}}

    @classmethod
    def identity_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` less :attr:`transport_options`: what an answer depends on (rows record
        these as ``adapter_options``; the command line is in ``requested_options``)."""
        return {key: value for key, value in options.items() if key not in cls.transport_options}

    @property
    def revision(self) -> str | None:
        """The model's commit or content hash, when known (recorded with every result): by
        default :meth:`stored_revision` of the checkpoint, so that an adapter whose revision is
        known from its checkpoint writes that one method."""
        return self.stored_revision(self.checkpoint)

    @classmethod
    def stored_revision(cls, checkpoint: str | None) -> str | None:
        """The :attr:`revision` that ``checkpoint`` has on disk now, read without building the
        model (the plugin resumes on it); ``None`` when it cannot be known before. An adapter
        that reads its :attr:`revision` from the built model keeps the two equal
        (``tests/adapters/test_contract.py`` checks every built-in)."""
        return None

    @classmethod
    def pair_revision(cls, checkpoint: str | None, dataset: str, split: str) -> str | None:
        """The :attr:`revision` a pair of ``dataset``'s ``split`` will record, known before
        building the model: :meth:`stored_revision` where one revision serves every dataset; an
        adapter whose revision depends on the dataset (a replayed file per dataset) overrides it."""
        return cls.stored_revision(checkpoint or cls.default_checkpoint)

    @classmethod
    def planned_info(cls, checkpoint: str | None, options: dict[str, Any], dataset: str, split: str) -> ModelInfo:
        """The :attr:`info` a pair of ``dataset``'s ``split`` will record for ``checkpoint`` and the
        ``options`` given (resolved, with defaults), worked out without building the model."""
        return ModelInfo(cls.name, checkpoint or cls.default_checkpoint, cls.pair_revision(checkpoint, dataset, split),
                         cls.identity_options(cls.resolved_options(options)))

    @property
    def is_smoke(self) -> bool:
        """True for models whose scores mean nothing (random weights): results say so."""
        return False

    @property
    def info(self) -> ModelInfo:
        """The model as its answers depend on it (:class:`ModelInfo`)."""
        return ModelInfo(self.name, self.checkpoint, self.revision, self.identity_options(self.options), self.is_smoke)

    def set_task(self, task: DetectionTask) -> None:
        """Told once per dataset, before any batch. Adapters precompute prompts here."""
        check_task(self.name, self.prompt_modes, task)
        self.task = task

    @abstractmethod
    def predict(self, batch: list[ImageItem]) -> list[Detections]:
        """Detections for each image of the batch, in order."""

    def detections_of(self, samples: Sequence["Sample"], batch_size: int = 16) -> dict[int, tuple[np.ndarray, ...]]:
        """:meth:`predict` on training samples, as STAC's teacher labels them: position ->
        ``xyxy`` boxes, scores, class indices."""
        out = {}
        for start in range(0, len(samples), batch_size):
            items = [ImageItem(samples[i].image, i, str(i)) for i in range(start, min(start + batch_size, len(samples)))]
            for item, found in zip(items, self.predict(items)):
                out[item.image_id] = (found.boxes, found.scores, found.labels)
        return out

    def ground(self, batch: list[ImageItem], queries: list[GroundingQuery]) -> list[GroundingAnswer]:
        """UOUO grounding: by default the best box for the target's name (:func:`best_boxes`)."""
        return best_boxes(self, batch, queries)

    def fit(self, data: TrainingData, recipe: "Recipe", store: "TrainedStore") -> "FitRecord":
        """Fine-tune the model on ``data`` by ``recipe`` (one of :attr:`recipes`, with its seed),
        starting from the checkpoint's own weights whatever ran before, checkpointing into
        ``store`` each epoch and resuming from its last one; leaves the model trained and its
        weights in the store. Only adapters with :attr:`recipes` implement it."""
        raise NotImplementedError(f"adapter {self.name!r} cannot be fine-tuned")

    def load_trained(self, store: "TrainedStore") -> None:
        """Load the weights of a finished fit (``store.record()`` is not ``None``) into the model."""
        raise NotImplementedError(f"adapter {self.name!r} cannot be fine-tuned")

    def answer_key_parts(self, query: GroundingQuery | None = None) -> tuple[str, ...] | None:
        """What the model is sent besides the image, for the current task (``query`` is
        ``None``) or for a UOUO question: the prompt texts, and the classes in order (they
        give the labels their meaning). The answer cache keys each answer on it, with the
        checkpoint, revision, options, dtype and the image's pixels. ``None`` (the default):
        the adapter does not say, and its answers are not cached."""
        return None

    def answer_counts(self) -> dict[str, int]:
        """Counts of what the adapter met in its answers since it was built (unreadable answers,
        unknown labels, ignored records...); each results row gets what its pair added."""
        return {}

    def start_pair(self) -> None:
        """Called before each pair runs: per-pair accounting (:meth:`pair_columns`) starts here."""

    def pair_columns(self) -> dict[str, Any]:
        """Columns the adapter adds to the row of the pair since :meth:`start_pair` (requests,
        tokens, cost, prompt style...); names the row already has are refused."""
        return {}

    def describe(self) -> dict[str, Any]:
        """What ran: recorded in results and benchmark ``extra_info``."""
        return {
            "model": self.name,
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "device": self.device,
            "dtype": self.dtype,
            "smoke": self.is_smoke,
        }

    def close(self) -> None:
        """Release memory; called once when the session ends."""


TINY = "tiny"
"""The checkpoint word for a tiny, randomly initialised model of the adapter's real
architecture, built offline and loaded through the normal ``from_pretrained(path)`` route:
``owlv2:tiny`` checks an installation end to end with no download (scores are meaningless)."""


def tiny_model_dir(name: str) -> Path:
    """Where the tiny random model of adapter ``name`` is built (once) under the cache home."""

    return cache_home() / "tiny-models" / name
