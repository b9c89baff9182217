"""One results row, declared once.

A row is a :class:`ResultRow` made of sections, each filled by the one part of a run that
knows it (the README's "What a run leaves" lists every column):

- :class:`RunColumns` (the session): which run wrote it, with what command;
- :class:`ModelColumns` (the session, from the adapter): the model and how it ran;
- :class:`DataColumns` (the benchmark kind): the dataset, split and what made them;
- the kind's scores (:class:`DetectionScores` for RF100-VL, :class:`GroundingScores` for UOUO,
  in percent and fractions as their papers report them), the errors behind them
  (:class:`DetectionErrors`, :class:`GroundingErrors`: ``docs/errors.md``) and its data extras
  (:class:`DetectionData`, :class:`MosaicData`);
- :class:`CheckColumns` (the session): minimums, where they came from, the verdict;
- :class:`ThroughputColumns` and :class:`OutputColumns` (the inference loop): speed, and what
  the model's output needed to be scored;
- :class:`TrainingColumns` (the training stage): how the model was fine-tuned first;
- :class:`ProvenanceColumns` (the session): versions and hardware;
- ``adapter`` columns (requests, tokens and cost of served models, prompt style...) and
  ``extra`` columns from ``pytest_rf100vl_result_row`` hooks.

On disk (``results.jsonl``, ``results.parquet``) a row is flat: :meth:`ResultRow.to_dict`
gives its columns, :meth:`ResultRow.from_dict` reads them back (a column no section declares
is kept in ``extra``). The identity columns (what a row measured), the throughput columns
(merged from an older row when a row's answers came from the cache) and the Arrow schema are
derived from the declarations: :data:`IDENTITY`, :data:`THROUGHPUT`, :func:`arrow_schema`.
Model: supervision's ``MeanAveragePrecisionResult`` (a typed result with conversions).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rf100vl_hf.protocols import PAPER
from rf100vl_hf.redact import scrubbed

SCHEMA_VERSION = 1
"""Bumped when a column changes meaning or type (``schema_version`` in every row)."""
SCORING_VERSION = 2
"""Bumped whenever a change of the plugin or the library changes a score for the same
predictions, so that older rows are not reused (``scoring_version``, part of a row's identity;
2: scored exactly as pycocotools scores them, maxDets per image and class)."""
IDENTITY_KEY = "identity"
THROUGHPUT_KEY = "throughput"
BENCHMARK_KEY = "benchmark_info"


def column(default: Any = None, *, identity: bool = False, measured: bool = False, benchmark: bool = False) -> Any:
    """A column: ``identity`` when it says what the row measured (rows of the same identity
    replace one another), ``measured`` when it is part of the throughput a row measured,
    ``benchmark`` when pytest-benchmark records it with the pair's timing (:data:`BENCHMARK_FIELDS`)."""
    return field(default=default, metadata={IDENTITY_KEY: identity, THROUGHPUT_KEY: measured,
                                            BENCHMARK_KEY: benchmark or measured})


@dataclass
class RunColumns:
    run_id: str
    timestamp: str
    command: str | None = None
    reused_from: str | None = None
    """The run whose row this one copies (a finished pair reused, not run again)."""
    schema_version: int = SCHEMA_VERSION


@dataclass
class ModelColumns:
    model: str = column(identity=True, benchmark=True)
    spec: str | None = column(benchmark=True)
    checkpoint: str | None = column(identity=True, benchmark=True)
    model_revision: str | None = column(identity=True, benchmark=True)
    adapter_options: str = column("{}", identity=True)
    """The options the answers depend on, defaults included, as sorted JSON."""
    requested_options: str | None = None
    """The options as given on the command line, as sorted JSON."""
    device: str | None = column(benchmark=True)
    dtype: str | None = column(identity=True, benchmark=True)
    device_map: str | None = column(benchmark=True)
    batch_size: int | None = column(benchmark=True)
    batch_size_requested: str | None = column(benchmark=True)
    attention: str | None = column(benchmark=True)
    compiled: bool = column(False, benchmark=True)
    compile_s: float | None = column(benchmark=True)
    smoke: bool = column(False, benchmark=True)
    """Random weights (or mosaics ranked by a random CLIP): the scores mean nothing."""


@dataclass
class DataColumns:
    benchmark: str = column(dataclasses.MISSING, benchmark=True)
    dataset: str = column(identity=True, benchmark=True)
    dataset_fingerprint: str | None = column(identity=True, benchmark=True)
    split: str | None = column(identity=True, benchmark=True)
    prompt: str | None = column(identity=True, benchmark=True)
    split_parameters: str | None = column("{}", identity=True)
    limit: int | None = column(identity=True)
    """``--rf100vl-limit N``: scored on the first N images only, never merged with a full run."""
    protocol: str | None = column(identity=True)
    """The scoring protocol (:mod:`rf100vl_hf.protocols`; a row without one is ``paper``'s)."""
    n_images: int = column(0, benchmark=True)


@dataclass
class DetectionData:
    domain: str | None = None


@dataclass
class MosaicData:
    uouo_config: str | None = None
    uouo_source: str | None = None
    uouo_source_fingerprint: str | None = None
    num_mosaics: int | None = None
    seed: int | None = column(identity=True)
    clip_model: str | None = None
    clip_weights: str | None = None


@dataclass
class DetectionScores:
    """COCO AP at maxDets 500, in percent (``None`` where undefined: no ground-truth box)."""

    scoring_backend: str | None = None
    ap: float | None = column(benchmark=True)
    ap50: float | None = None
    ap75: float | None = None
    ap_small: float | None = None
    ap_medium: float | None = None
    ap_large: float | None = None
    ar500: float | None = None
    ar100: float | None = None
    """AR at the protocol's maxDets: ``ar500`` for the paper's, ``ar100`` for Roboflow's scripts'."""
    max_dets: int | None = None
    n_predictions: int | None = None
    n_instances: int | None = None
    per_class: list[dict[str, Any]] | None = None
    predictions_file: str | None = None


@dataclass
class GroundingScores:
    """UOUO's quadrant accuracy, mIoU and acc50 (fractions, as its Table 1), and parse failures."""

    accuracy: float | None = column(benchmark=True)
    miou: float | None = column(benchmark=True)
    acc50: float | None = None
    parse_failures: int | None = None
    box_parse_failures: int | None = None
    quadrant_parse_failures: int | None = None
    predictions_file: str | None = None


# ---------------------------------------------------------------- the errors behind a score (docs/errors.md)


@dataclass
class DetectionErrors:
    """Why a detection row's AP is what it is: TIDE's ΔAP50 of each error type and of the two
    oracles (in AP points, at IoU 0.5 with background below 0.1), the count of each type, the
    most confused classes (the whole matrix is ``confusion_file``), calibration, and the files
    of the images whose ground truth a confident detection disputes."""

    tide_cls: float | None = None
    tide_loc: float | None = None
    tide_both: float | None = None
    tide_dupe: float | None = None
    tide_bkg: float | None = None
    tide_miss: float | None = None
    tide_fp: float | None = None
    tide_fn: float | None = None
    tide_cls_n: int | None = None
    tide_loc_n: int | None = None
    tide_both_n: int | None = None
    tide_dupe_n: int | None = None
    tide_bkg_n: int | None = None
    tide_miss_n: int | None = None
    confused_pairs: list[dict[str, Any]] | None = None
    """The most frequent confusions, ``{truth, predicted, count}``, most frequent first."""
    confusion_file: str | None = None
    ece: float | None = None
    mce: float | None = None
    calibration_note: str | None = None
    """Why ECE and MCE are missing (every box scored the same, or none was found)."""
    label_error_files: list[str] | None = None


@dataclass
class GroundingErrors:
    """A grounding row's answers by quadrant (the target's quadrant against the answer's, or
    ``no answer``) and the spread of its box IoUs."""

    quadrant_confusion: list[dict[str, Any]] | None = None
    """``{truth, answer, count}`` of every answered pair that occurred."""
    iou_histogram: list[int] | None = None
    """Targets per IoU tenth: [0, 0.1), [0.1, 0.2), ... [0.9, 1.0]."""
    iou_median: float | None = None


ERRORS: dict[str, type] = {"rf100vl": DetectionErrors, "uouo": GroundingErrors}
"""Each built-in benchmark's errors section."""
ERROR_ARROW_TYPES: dict[str, Any] = {
    "confused_pairs": (("truth", "string"), ("predicted", "string"), ("count", "int64")),
    "quadrant_confusion": (("truth", "string"), ("answer", "string"), ("count", "int64")),
}
"""The errors sections' lists of structs, by field: what :func:`arrow_schema` types them as."""


@dataclass
class CheckColumns:
    minimums: dict[str, float | None] = field(default_factory=dict)
    """Metric name -> its minimum (``min_<metric>`` columns)."""
    threshold_source: str | None = None
    check: str = "unchecked"
    unscored: str | None = None
    """Why nothing could be scored (the pair errors; a score of 0 is a score)."""


@dataclass
class ThroughputColumns:
    images_per_s: float = column(float("nan"), measured=True)
    images_per_s_min: float | None = column(measured=True)
    images_per_s_max: float | None = column(measured=True)
    throughput_rounds: int = column(0, measured=True)
    latency_batch_p50_ms: float | None = column(measured=True)
    latency_batch_p95_ms: float | None = column(measured=True)
    latency_image_p50_ms: float | None = column(measured=True)
    latency_image_p95_ms: float | None = column(measured=True)
    peak_gpu_memory_mb: float | None = column(benchmark=True)
    inference_s: float | None = None
    warmup_s: float | None = column(benchmark=True)
    warmup_batches: int | None = column(benchmark=True)
    cached_images: int = column(0, benchmark=True)
    answers_from_cache: bool = False
    throughput_from: str | None = column(benchmark=True)
    """The run that measured the throughput of a row whose answers all came from the cache."""


@dataclass
class OutputColumns:
    dropped: int = 0
    clipped: int = 0
    swapped: int = 0
    truncated: int = 0
    failed_images: int = 0
    first_error: str | None = None
    answer_counts: dict[str, int] = field(default_factory=dict)
    samples_file: str | None = None
    """The samples log of a model that answers in text (the report key ``log-samples``)."""


@dataclass
class TrainingColumns:
    train_split: str | None = column(identity=True)
    train_split_parameters: str | None = column(identity=True)
    recipe: str | None = column(identity=True)
    hyperparameters: str | None = column(identity=True)
    seed: int | None = column(identity=True)
    regime: str = "zero-shot"
    train_s: float | None = None
    train_epochs: int | None = None
    train_steps: int | None = None
    train_images_per_s: float | None = None
    train_loss_first: float | None = None
    train_loss_final: float | None = None
    train_losses: str | None = None
    train_peak_gpu_memory_mb: float | None = None
    train_resumed_after_epoch: int | None = None
    train_details: str | None = None
    weights_sha256: str | None = None
    weights_reused: bool | None = None


@dataclass
class ProvenanceColumns:
    scoring_version: int = column(SCORING_VERSION, identity=True)
    versions: dict[str, str | None] = field(default_factory=dict)
    """Package -> version (``<package>_version`` columns)."""
    python_version: str | None = None
    cpu_model: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    package_commit: str | None = None


SCORES: dict[str, type] = {"rf100vl": DetectionScores, "uouo": GroundingScores}
"""Each built-in benchmark's scores section; another kind's scores are ``extra`` columns."""
DATA: dict[str, type] = {"rf100vl": DetectionData, "uouo": MosaicData}
TRAINED: frozenset[str] = frozenset({"rf100vl"})
"""Benchmarks whose rows carry the training columns (zero-shot rows too, all ``None``)."""


@dataclass
class ResultRow(Mapping[str, Any]):
    """One pair's results row (see the module docstring).

    The project reads a row by attribute (``row.scores.ap``, ``row.model.checkpoint``); a row is also
    a read-only mapping of its columns (``row["ap"]``, ``row.get("ap")``, ``dict(row)``) so
    that a hook or a script written against the rows of ``results.jsonl`` keeps working."""

    run: RunColumns
    model: ModelColumns
    data: DataColumns
    scores: Any = None
    """The benchmark's scores section (:data:`SCORES`), a mapping of another kind's score
    columns, or ``None``."""
    data_extra: Any = None
    """The benchmark's own data columns (:data:`DATA`), or ``None``."""
    errors: Any = None
    """The errors behind the benchmark's scores (:data:`ERRORS`), or ``None``."""
    check: CheckColumns = field(default_factory=CheckColumns)
    throughput: ThroughputColumns = field(default_factory=ThroughputColumns)
    output: OutputColumns = field(default_factory=OutputColumns)
    training: TrainingColumns | None = None
    provenance: ProvenanceColumns = field(default_factory=ProvenanceColumns)
    adapter: dict[str, Any] = field(default_factory=dict)
    """Columns the adapter reports for the pair (requests, tokens, cost, prompt style...)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Columns no section declares (``pytest_rf100vl_result_row`` hooks, other kinds' scores)."""

    def __getitem__(self, name: str) -> Any:
        return self.to_dict()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def sections(self) -> Iterator[Any]:
        yield from (self.run, self.model, self.data, self.data_extra, self.scores, self.errors, self.check,
                    self.throughput, self.output, self.training, self.provenance)

    @property
    def spec(self) -> str:
        """The full spec the row was run with (its model's name in rows that lack one)."""
        return str(self.model.spec or self.model.model)

    @property
    def protocol(self) -> str:
        """The protocol the row was scored under (``paper`` for rows written before protocols)."""
        return self.data.protocol or PAPER

    @property
    def regime(self) -> str:
        """The row's data regime (``zero-shot`` for a kind without training columns)."""
        return (self.training.regime if self.training is not None else None) or "zero-shot"

    @property
    def seed(self) -> int | None:
        """The seed the row was made with: its fit's (RF100-VL) or its mosaics' (UOUO)."""
        return self.column("seed")

    def with_columns(self, **values: Any) -> "ResultRow":
        """A copy with ``values`` as its columns of those names (each in the section that declares it)."""
        return ResultRow.from_dict({**self.to_dict(), **values})

    def scrubbed(self) -> "ResultRow":
        """A copy with the session's secrets scrubbed from every text (:func:`rf100vl_hf.redact.scrubbed`)."""
        return ResultRow.from_dict(scrubbed(self.to_dict()))

    def identity(self) -> dict[str, Any]:
        """The row's :data:`IDENTITY` columns: what it measured (the ``paper`` protocol for a row
        written before protocols were recorded: that is the one it was scored under)."""
        return {name: self.protocol if name == "protocol" else self.column(name) for name in IDENTITY}

    def column(self, name: str) -> Any:
        """The value of the column called ``name`` (``None`` where the row has none), for code
        that holds a metric's name as data (a thresholds rule's, a table's choice of metric);
        code that knows the column reads its section's attribute."""
        if name.startswith("min_") and name[4:] in self.check.minimums:
            return self.check.minimums[name[4:]]
        for section in (*self.sections(), self.adapter, self.extra):
            declared = _names(type(section))
            if declared is None:
                if name in section:
                    return section[name]
            elif name in declared:
                return getattr(section, name)
        return None

    def to_dict(self) -> dict[str, Any]:
        """The row's columns, as ``results.jsonl`` holds them."""
        row: dict[str, Any] = {}
        for section in self.sections():
            if isinstance(section, Mapping):
                row.update(section)
            elif section is not None:
                row.update(_columns(section))
        for source, columns in (("adapter", self.adapter), ("extra", self.extra)):
            clash = sorted(set(columns) & set(row))
            if clash:
                raise ValueError(f"{source} columns may only add to a row; {', '.join(clash)} are the row's own")
            row.update(columns)
        return row

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> "ResultRow":
        """A row read back: a column missing from an older row takes its default, but an
        identity column is ``None`` (an older row never passes for one of today's identity,
        its ``scoring_version`` above all)."""
        left = dict(row)
        benchmark = str(row.get("benchmark"))
        made = {name: _section(section, left) for name, section in (
            ("run", RunColumns), ("model", ModelColumns), ("data", DataColumns), ("check", CheckColumns),
            ("throughput", ThroughputColumns), ("output", OutputColumns), ("provenance", ProvenanceColumns))}
        scores = _section(SCORES[benchmark], left) if benchmark in SCORES else None
        data_extra = _section(DATA[benchmark], left) if benchmark in DATA else None
        errors = _section(ERRORS[benchmark], left) if benchmark in ERRORS else None
        training = _section(TrainingColumns, left) if benchmark in TRAINED else None
        return cls(scores=scores, data_extra=data_extra, errors=errors, training=training, extra=left, **made)


AnyRow = typing.Union[ResultRow, Mapping[str, Any]]
"""A row typed, or as a results file holds it (read through :meth:`ResultRow.from_dict`)."""


def as_row(row: AnyRow) -> ResultRow:
    """A row as :class:`ResultRow`: a row as a file holds it read through :meth:`ResultRow.from_dict`."""
    return row if isinstance(row, ResultRow) else ResultRow.from_dict(row)


def as_rows(rows: Iterable[AnyRow]) -> list[ResultRow]:
    """Rows as :class:`ResultRow` (:func:`as_row`)."""
    return [as_row(row) for row in rows]


def identity_of(*sections: Any) -> dict[str, Any]:
    """The identity columns (:data:`IDENTITY`) of ``sections``: the one way a row's identity,
    the one a resumed pair must match and a fit's key are assembled."""
    return {item.name: getattr(section, item.name) for section in sections
            for item in dataclasses.fields(section) if item.metadata.get(IDENTITY_KEY)}


@functools.cache
def _names(section: type) -> frozenset[str] | None:
    """The columns a section of this type declares (none for an absent one); ``None`` for a
    mapping, whose keys are its columns. Cached by type: tables ask tens of thousands of times."""
    if issubclass(section, Mapping):
        return None
    return frozenset() if section is type(None) else frozenset(item.name for item in dataclasses.fields(section))


def _columns(section: Any) -> dict[str, Any]:
    """A section's columns: its fields, with ``minimums`` as ``min_<metric>`` and ``versions``
    as ``<package>_version`` (dashes as underscores)."""
    columns: dict[str, Any] = {}
    for item in dataclasses.fields(section):
        value = getattr(section, item.name)
        if item.name == "minimums":
            columns.update({f"min_{metric}": minimum for metric, minimum in value.items()})
        elif item.name == "versions":
            columns.update({f"{package.replace('-', '_')}_version": v for package, v in value.items()})
        else:
            columns[item.name] = value
    return columns


NOT_PACKAGES = ("python_version", "schema_version", "scoring_version")
"""Columns ending in ``_version`` that name no package's version."""


def package_versions(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``<package>_version`` columns of a row, by package (dashes as underscores)."""
    return {key[:-8]: value for key, value in row.items() if key.endswith("_version") and key not in NOT_PACKAGES}


def _section(section: type, left: dict[str, Any]) -> Any:
    """A section made from (and taken out of) ``left``'s columns."""
    values: dict[str, Any] = {}
    for item in dataclasses.fields(section):
        if item.name == "minimums":
            values["minimums"] = {key[4:]: left.pop(key) for key in list(left) if key.startswith("min_")}
        elif item.name == "versions":
            values["versions"] = package_versions(left)
            for package in values["versions"]:
                del left[f"{package}_version"]
        elif item.name in left:
            values[item.name] = left.pop(item.name)
    unknown = [item.name for item in dataclasses.fields(section) if item.metadata.get(IDENTITY_KEY) or (
        item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING)]
    values.update({name: None for name in unknown if name not in values})
    return section(**values)


def _flagged(key: str) -> tuple[str, ...]:
    sections = (ModelColumns, DataColumns, *DATA.values(), *SCORES.values(), ThroughputColumns, TrainingColumns,
                ProvenanceColumns)
    return tuple(dict.fromkeys(item.name for section in sections for item in dataclasses.fields(section)
                               if item.metadata.get(key)))


IDENTITY: tuple[str, ...] = _flagged(IDENTITY_KEY)
"""The columns that say what a row measured; two rows that agree on all of them measured the
same thing, and the later one replaces the earlier (a column a row lacks counts as None)."""
THROUGHPUT: tuple[str, ...] = _flagged(THROUGHPUT_KEY)
"""What a row measured of speed: a row answered from the answer cache measured none of it."""
BENCHMARK_FIELDS: tuple[str, ...] = _flagged(BENCHMARK_KEY)
"""The columns pytest-benchmark records in a pair's ``extra_info`` (and so in
``--benchmark-json``): what ran, on what, how fast, and the kind's headline scores."""


def plain_arrow_types() -> dict[type, Any]:
    """The Arrow type of a column of each plain Python type."""
    import pyarrow as pa

    return {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


def arrow_schema() -> Any:
    """The Arrow type of every declared column (``per_class`` a list of ``{class, ap, ap50,
    n_instances}``, ``answer_counts`` a list of ``{name, count}``, so ``datasets`` can load
    them); ``min_<metric>`` and ``<package>_version`` columns, and undeclared ones, are typed
    from their values when written."""
    import pyarrow as pa

    special = {
        "per_class": pa.list_(pa.struct([("class", pa.string()), ("ap", pa.float64()), ("ap50", pa.float64()),
                                         ("n_instances", pa.int64())])),
        "answer_counts": pa.list_(pa.struct([("name", pa.string()), ("count", pa.int64())])),
        "iou_histogram": pa.list_(pa.int64()),
        "label_error_files": pa.list_(pa.string()),
        **{name: pa.list_(pa.struct([(key, getattr(pa, kind)()) for key, kind in struct]))
           for name, struct in ERROR_ARROW_TYPES.items()},
    }
    plain = plain_arrow_types()
    fields: dict[str, Any] = {}
    sections = (RunColumns, ModelColumns, DataColumns, *DATA.values(), *SCORES.values(), *ERRORS.values(),
                CheckColumns,
                ThroughputColumns, OutputColumns, TrainingColumns, ProvenanceColumns)
    for section in sections:
        hints = typing.get_type_hints(section)
        for item in dataclasses.fields(section):
            if item.name in special:
                fields[item.name] = special[item.name]
            elif item.name not in ("minimums", "versions"):
                fields[item.name] = plain[_base_type(hints[item.name])]
    return pa.schema(list(fields.items()))


def _base_type(hint: Any) -> type:
    """``str`` of ``str | None``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))
    return hint
