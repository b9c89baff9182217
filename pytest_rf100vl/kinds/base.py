"""What a benchmark kind is: the narrow protocol the session drives for every benchmark.

A kind is a *dataset provider* (which dataset names are its own, how one is loaded into the
:class:`Split` a pair runs on, how long a pair takes) and a *scorer* (the :class:`Scored`
of the model's answers on that split). Everything around it is the session's, the same for
every kind: the matrix, fine-tuning, the inference loop, thresholds and failures, resuming,
rows and the summary (``docs/architecture.md``). RF100-VL detection (:mod:`.rf100vl`) and
UOUO grounding (:mod:`.uouo`) are built in; a third kind is a subclass registered in the
``rf100vl.kinds`` entry-point group. Example, a kind counting objects in generated images::

    class Counting(BenchmarkKind):
        name, test_name = "count", "test_counting"
        metrics = (Metric("count_accuracy", "count accuracy", 2, kind="count", fraction="a share"),)

        def datasets(self):
            return ["count-a"]

        def load(self, dataset, device):
            images = make_images()  # a datasets.Dataset with image, image_id and file_name
            return Split(images, DetectionTask(dataset, ["object"]), identity={"dataset_fingerprint": "v1"})

        def score(self, answers, split):
            right = [len(found.scores) == 2 for found in answers.detections.values()]
            return Scored({"count_accuracy": sum(right) / len(right)})

Model: torchmetrics' ``Metric`` (``update``/``compute``): the session feeds, the kind scores.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_rf100vl.core.checks import MeanCheck
from pytest_rf100vl.core.minimums import Metric, Rule
from pytest_rf100vl.core.options import option

if TYPE_CHECKING:  # for hints only: every pytest session reads the kinds' options, so this module stays light
    import datasets

    from rf100vl_hf.results.schema import ResultRow

    from pytest_rf100vl.adapters.base import DetectionTask, Entry, GroundingQuery, TrainingData
    from pytest_rf100vl.core.training_plan import TrainingPlan
    from pytest_rf100vl.engine.runner import Answers

__all__ = ["BenchmarkKind", "Metric", "NoOptions", "Report", "Scored", "Split", "SplitIdentity", "option"]


@dataclass(frozen=True)
class NoOptions:
    """The options section of a kind that has none."""


@dataclass
class Split:
    """What a pair runs on: a split's images and what the model is told or asked of them.

    ``images`` has an image column, an id column (``image_id``) and ``file_name``; ``task`` is
    what a detector is told once (its classes, prompt, few-shot examples); ``questions``, one
    per image, makes the model answer :meth:`Adapter.ground` instead of :meth:`Adapter.predict`.
    ``identity`` holds the row's data columns that say what was measured (``dataset_fingerprint``,
    ``split_parameters``, ``prompt``); ``extra`` the kind's own data columns (a section of
    :mod:`rf100vl_hf.results.schema`). ``truth`` gives the task with the ground truth, for the
    adapters that need it (the oracle) and no other. ``metadata`` is what the kind's scorer
    reads of the dataset; ``id_column`` and ``name_column`` name ``images``' id and file name
    columns (``None``: images are named by their stored path)."""

    images: "datasets.Dataset"
    task: "DetectionTask | None" = None
    questions: "Sequence[GroundingQuery] | None" = None
    name: str = "test"
    identity: dict[str, Any] = field(default_factory=dict)
    extra: Any = None
    truth: "Callable[[], DetectionTask] | None" = None
    metadata: dict[str, Any] = field(default_factory=dict)
    id_column: str = "image_id"
    name_column: str | None = "file_name"
    smoke: bool = False
    """The data itself makes scores meaningless (mosaics ranked by a random CLIP): rows say so."""

    def task_for(self, entry: "Entry", trained: bool = False) -> "DetectionTask | None":
        """What a model of registry ``entry`` is told: the task, with the ground truth only if it
        declares it needs it; ``trained``: the model was fine-tuned on this dataset first."""
        return self.truth() if entry.needs_ground_truth and self.truth is not None else self.task

    def first(self, count: int | None) -> "Split":
        """This split cut to its first ``count`` images (``--rf100vl-limit``); all of it for ``None``."""
        if count is None or count >= len(self.images):
            return self
        questions = None if self.questions is None else self.questions[:count]
        return replace(self, images=self.images.select(range(count)), questions=questions)

    # what a kind whose pairs fine-tune first (``BenchmarkKind.trains``) also gives
    def training_data(self, plan: "TrainingPlan") -> "TrainingData":
        """What :meth:`Adapter.fit` trains on for ``plan``."""
        raise NotImplementedError(f"{type(self).__name__} gives no training data")

    def split_parameters(self, split: str) -> str:
        """What made the split ``split`` (a training split's identity), as JSON."""
        raise NotImplementedError(f"{type(self).__name__} gives no split parameters")


@dataclass(frozen=True)
class SplitIdentity:
    """What tells a pair's measurement on a split apart, known without opening the split: its
    ``name``, the row's data columns of :attr:`Split.identity`, and ``parameters``, the split
    parameters of a split of the dataset by name (a fine-tuned pair's training split). A rerun
    decides on it that a finished pair is reused, so that deciding loads nothing."""

    name: str
    identity: dict[str, Any]
    parameters: Callable[[str], str]

    def split_parameters(self, split: str) -> str:
        """What made the split ``split``, as JSON (:meth:`Split.split_parameters`)."""
        return self.parameters(split)


@dataclass
class Scored:
    """A kind's scores of a pair.

    ``values``: each metric's value (what thresholds check; ``None`` where undefined);
    ``columns``: the row's scores section (a dataclass of :mod:`rf100vl_hf.results.schema`, or a
    mapping of columns; ``values`` by default); ``predictions``: what the model answered, as the
    kind writes it (``format`` ``json``: one JSON document, COCO results say; ``jsonl``: one
    record per image); ``unscored``: why nothing could be scored (the pair then errors, a score
    of 0 being a score); ``result``: the kind's own result object (``rf100vl_run.scores``);
    ``errors``: the row's errors section (:data:`rf100vl_hf.results.schema.ERRORS`);
    ``files``: column -> (suffix, text) of files written beside the predictions, whose paths
    the session puts in those columns of ``errors``."""

    values: dict[str, float | None]
    columns: Any = None
    predictions: list[dict[str, Any]] | None = None
    format: str = "json"
    unscored: str | None = None
    result: Any = None
    errors: Any = None
    files: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class Report:
    """A kind's parts of the summary: markdown sections over its rows, and checks of means run
    once the session has ended (domain means, say)."""

    sections: list[str] = field(default_factory=list)
    checks: list[MeanCheck] = field(default_factory=list)


class BenchmarkKind(ABC):
    """One benchmark. Subclasses set the class attributes and implement :meth:`datasets` (or
    :meth:`claims`), :meth:`load` and :meth:`score`; an instance is made per pytest session
    with the run's values of its options."""

    name: ClassVar[str]
    """The kind's name: rows' ``benchmark`` column, and what registry entries list in ``Entry.tasks``."""
    test_name: ClassVar[str]
    """The plugin's test function for this kind's pairs, e.g. ``test_detection``."""
    test_doc: ClassVar[str] = "The pair ran; its scores meet their thresholds when it has them."
    options_section: ClassVar[type] = NoOptions
    """The kind's options: a frozen dataclass whose fields are options
    (:func:`pytest_rf100vl.core.options.option`); the run's values are :attr:`options`."""
    metrics: ClassVar[tuple[Metric, ...]] = ()
    """Metrics that can have minimums (thresholds file columns ``min_<name>``)."""
    trains: ClassVar[bool] = False
    """Whether ``--rf100vl-train`` fine-tunes its pairs' models first (its splits give training data)."""
    fallback: ClassVar[bool] = False
    """The kind of a thresholds-file target that no kind claims (at most one kind)."""
    means: ClassVar[Mapping[str, str]] = {}
    """Thresholds-file targets that name a mean the kind checks (lower-cased -> as the kind spells it)."""
    target_description: ClassVar[str] = "a dataset of this benchmark"
    """How a thresholds-file error names the targets of this kind's metrics."""

    def __init__(self, options: Any = None):
        self.options: Any = NoOptions() if options is None else options

    # -- the datasets -----------------------------------------------------------------
    @abstractmethod
    def datasets(self) -> list[str]:
        """Every dataset name the kind knows (what an unknown name is matched against)."""

    def claims(self, dataset: str) -> bool:
        """Whether ``dataset`` (a name given with ``--rf100vl-dataset``) is this kind's."""
        return dataset in self.datasets()

    def group(self, value: str) -> list[str] | None:
        """The datasets a value of ``--rf100vl-dataset`` names together (RF100-VL: ``all``,
        ``rf20vl``, ``domain:NAME``), else ``None``: a value no kind groups is one dataset's name."""
        return None

    @abstractmethod
    def load(self, dataset: str, device: str) -> Split:
        """The split of ``dataset`` its pairs run on, loaded (prepared when needed); called once
        per session and name. Raise ``DatasetNotFoundError`` when it is not on disk (the pair
        is skipped), ``ValueError`` or ``RuntimeError`` when it cannot be loaded."""

    def identify(self, dataset: str) -> SplitIdentity | None:
        """The identity of the split :meth:`load` would give, when it can be known without
        loading it (a ``stat`` of the files it was built from, say): a rerun then reuses a
        finished pair without opening its dataset. ``None`` (the default): the split is loaded."""
        return None

    def cost(self, dataset: str) -> float:
        """How long a pair of ``dataset`` takes, relatively (images to answer, say), read cheaply
        and the same on every machine that sees the same data; shards are balanced on it."""
        return 1.0

    # -- the score --------------------------------------------------------------------
    @abstractmethod
    def score(self, answers: "Answers", split: Split) -> Scored:
        """The pair's scores from the model's answers on ``split`` (detections by image id, or
        grounding answers in row order)."""

    # -- the report -------------------------------------------------------------------
    def report(self, rows: list[ResultRow], rules: list[Rule]) -> Report:
        """The kind's summary sections over its rows, and its checks of means."""
        return Report()
