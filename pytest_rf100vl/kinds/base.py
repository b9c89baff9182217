"""What a benchmark kind is: the one protocol the plugin drives for every benchmark.

A kind owns everything that differs between benchmarks: which dataset names it answers
for and which its own options select, its options, how it loads a dataset, how it runs and
scores one (model, dataset) pair, which metrics can have minimums, the columns of its
results rows, its sections of the summary and its checks of means. The plugin around it
(collection, the session, the results folder, the summary) never names a kind. RF100-VL
detection (:mod:`.rf100vl`) and UOUO grounding (:mod:`.uouo`) are built in; a third kind is
a subclass registered in the ``rf100vl.kinds`` entry-point group (see ``docs/architecture.md``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_rf100vl.core.settings import Option, Settings
from pytest_rf100vl.core.metrics import Metric, Rule, Threshold

if TYPE_CHECKING:
    from pytest_rf100vl.adapters.base import Adapter
    from pytest_rf100vl.core.pairs import Pair
    from pytest_rf100vl.core.checks import MeanCheck
    from pytest_rf100vl.core.session import MatrixView


@dataclass
class PairRun:
    """A finished pair: its kind's evaluation (scores, inference record, predictions), its
    results row, its thresholds (metric -> minimum) and the failure message when it is below one."""

    pair: "Pair"
    evaluation: Any
    row: dict[str, Any]
    thresholds: dict[str, Threshold] = field(default_factory=dict)
    failure: str | None = None

    @property
    def scores(self) -> Any:
        """The kind's scores (COCO scores for RF100-VL, grounding scores for UOUO); ``None`` for a
        pair reused from an earlier run (its ``evaluation`` is ``None``: the row holds the scores)."""
        return None if self.evaluation is None else self.evaluation.scores


class BenchmarkKind(ABC):
    """One benchmark. Subclasses set the class attributes and implement the abstract methods;
    an instance is made per pytest session with its :class:`Settings`."""

    name: ClassVar[str]
    """The kind's name: rows' ``benchmark`` column, and what adapters list in ``Adapter.tasks``."""
    test_name: ClassVar[str]
    """The plugin's test function for this kind's pairs, e.g. ``test_detection``."""
    test_doc: ClassVar[str] = "The pair ran; its scores meet their thresholds when it has them."
    options: ClassVar[tuple[Option, ...]] = ()
    """The kind's own command-line and ini options."""
    selectors: ClassVar[tuple[str, ...]] = ()
    """The ``dest`` of options that select datasets by themselves (e.g. a domain)."""
    metrics: ClassVar[tuple[Metric, ...]] = ()
    """Metrics that can have minimums (thresholds file columns ``min_<name>``)."""
    fallback: ClassVar[bool] = False
    """The kind of a thresholds-file target that no other kind claims (at most one kind)."""
    target_description: ClassVar[str] = "a dataset of this benchmark"
    """How a thresholds-file error names the targets of this kind's metrics."""

    def __init__(self, settings: Settings):
        self.settings = settings

    @classmethod
    def adapter_defaults(cls, values: Mapping[str, Any]) -> dict[str, dict[str, str]]:
        """Adapter name -> default options this kind's option ``values`` (every option's parsed
        value by ``dest``) give that adapter, e.g. a scoring protocol's; a user's
        ``--rf100vl-adapter-option`` overrides them. None by default."""
        return {}

    # -- collection -------------------------------------------------------------------
    @abstractmethod
    def claims(self, dataset: str) -> bool:
        """Whether ``dataset`` (a name given with ``--rf100vl-dataset``) is this kind's."""

    def known_datasets(self) -> list[str]:
        """Names to suggest when a dataset name is unknown."""
        return []

    def selected(self) -> list[str]:
        """Datasets this kind's own options select (beside the names given)."""
        return []

    def seeds(self) -> tuple[int | None, ...]:
        """The seeds each of this kind's (model, dataset) pairs runs with, one pair each; ``(None,)``
        (the default): one pair, nothing seeded (a model scored as it comes)."""
        return (None,)

    def header_lines(self, pairs: list["Pair"]) -> list[str]:
        """Lines of the pytest report header when the session has pairs of this kind."""
        return []

    # -- running ----------------------------------------------------------------------
    @abstractmethod
    def load(self, dataset: str, session: "MatrixView") -> Any:
        """Load (preparing it when needed) ``dataset``; called once per session and name.
        Raise ``DatasetNotFoundError`` when it is not on disk (the pair is skipped)."""

    def split(self, dataset: str, loaded: Any, split: str | None) -> Any:
        """The split of the loaded ``dataset`` a pair runs on (``None``: the kind's default);
        ``ValueError`` when it has no such split."""
        return loaded

    @property
    def limit(self) -> int | None:
        """``--rf100vl-limit N``: pairs run on the first N images of their split (``None``: all).
        A kind that honours it cuts its split with :meth:`first_images`, names its output with
        :meth:`output_name` and writes the value in its rows' ``limit`` column."""
        return self.settings.values.get("rf100vl_limit")

    def first_images(self, split: Any) -> Any:
        """The first :attr:`limit` rows of a ``datasets.Dataset`` split (all of them without a limit)."""
        if self.limit is None:
            return split
        return split.select(range(min(self.limit, len(split))))

    def output_name(self, split: str) -> str:
        """The stem of a pair's predictions file: the split, plus the limit when there is one, so
        that a quick run never overwrites the predictions a full run's row points at."""
        return split if self.limit is None else f"{split}.first{self.limit}"

    def left_out(self, pair: "Pair", adapter: "Adapter") -> str | None:
        """Why ``pair`` is left out for its model (``None``: it runs): by default, a model that
        does not answer this benchmark (``Adapter.tasks``)."""
        if self.name not in adapter.tasks:
            return f"{adapter.name} does not answer {self.name} datasets (it answers: {', '.join(adapter.tasks)})"
        return None

    @abstractmethod
    def run(self, pair: "Pair", adapter: "Adapter", session: "MatrixView", benchmark: Any) -> PairRun:
        """Run and score one pair, write its predictions with ``session.writer``, and return
        its row (the common columns of :func:`pytest_rf100vl.engine.columns.common_columns` plus
        the kind's own) with its threshold checks."""

    def planned_identity(self, pair: "Pair", session: "MatrixView") -> dict[str, Any] | None:
        """The dataset's identity columns of the row ``pair`` would write (``dataset``,
        ``dataset_fingerprint``, ``split``, ``prompt``, and ``split_parameters`` where the
        kind has them), without running it, so a finished row can be reused; ``None`` (the
        default): this kind's pairs always run."""
        return None

    def reuse(self, pair: "Pair", row: dict[str, Any], session: "MatrixView") -> PairRun:
        """A finished row of an earlier run as this session's run of ``pair``, checked against
        this session's thresholds: each metric's minimum from the thresholds file, else from
        its kind's ``--<kind>-min-<metric>`` option."""
        from pytest_rf100vl.core.metrics import check_status

        thresholds = self.thresholds(pair, session)
        row.update({metric.column: thresholds[metric.name].minimum if metric.name in thresholds else None
                    for metric in self.metrics})
        row["threshold_source"] = "; ".join(dict.fromkeys(t.source for t in thresholds.values())) or None
        row["check"] = check_status([(row.get(name), t) for name, t in thresholds.items()])
        return PairRun(pair, None, row, thresholds, self.failure(pair, row, thresholds))

    def thresholds(self, pair: "Pair", session: "MatrixView") -> dict[str, Threshold]:
        """Each metric's minimum for ``pair`` (metric name -> minimum): from the thresholds file,
        else from the kind's ``--<kind>-min-<metric>`` option; metrics with neither are left out."""
        from pytest_rf100vl.core.metrics import threshold_for

        thresholds = {}
        for metric in self.metrics:
            minimum = self.settings.values.get(f"{metric.kind}_min_{metric.name}")
            default = None if minimum is None else Threshold(minimum, f"--{metric.kind}-min-{metric.name}")
            threshold = threshold_for(session.rules, pair.model, pair.dataset, metric.name, default)
            if threshold is not None:
                thresholds[metric.name] = threshold
        return thresholds

    def failure(self, pair: "Pair", row: dict[str, Any], thresholds: dict[str, Threshold]) -> str | None:
        """The failure message of a row below any of its minimums (``None`` when it meets them)."""
        from pytest_rf100vl.core.metrics import failure

        by_name = {metric.name: metric for metric in self.metrics}
        label = f"{pair.model} on {pair.dataset}"
        messages = [failure(label, by_name[name], row.get(name), t) for name, t in thresholds.items()]
        return "; ".join(m for m in messages if m) or None

    def cost(self, dataset: str) -> float:
        """How long a pair of ``dataset`` takes, relatively (images to answer, say), read cheaply
        and the same on every machine that sees the same data; shards are balanced on it."""
        return 1.0

    def unscored(self, row: dict[str, Any]) -> str | None:
        """Why a pair that ran has no score at all (it then errors instead of passing), or
        ``None`` when it was scored. A score of 0 is a score: too many failed images fail a
        pair through ``--rf100vl-max-failed-fraction``."""
        return None if row["n_images"] else "the split has no images"

    # -- reporting --------------------------------------------------------------------
    def summary_sections(self, rows: list[dict[str, Any]]) -> list[str]:
        """Markdown lines of this kind's sections of the summary, over its rows."""
        return []

    def mean_checks(self, rows: list[dict[str, Any]], rules: list[Rule]) -> list["MeanCheck"]:
        """Checks run once the session has ended (e.g. domain means); reported in the summary."""
        return []

    def accepts_threshold_target(self, target: str) -> bool:
        """Whether a thresholds-file target may carry minimums of this kind's metrics."""
        return self.claims(target)

    def spell_target(self, target: str) -> str:
        """A thresholds-file target as this kind spells it (e.g. a domain's canonical name)."""
        return target
