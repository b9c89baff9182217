"""A run's configuration, typed: parsed once at the edge (the command line, the ini file, a
``--rf100vl-config`` YAML file, or Python), then passed inward as values.

:class:`RunConfig` is made of small sections (:class:`MatrixConfig`: what runs;
:class:`LoopConfig`: how the inference loop runs; :class:`TrainingConfig`: fine-tuning first;
:class:`ReportConfig`: where results go and what fails a run), each benchmark kind's own
section. Every field is an option (:mod:`pytest_rf100vl.core.options`): a key of the config
file and of the ini file, and for the few a run changes most a flag, so the same run can be
written three ways::

    pytest --rf100vl-model=owlv2:tiny --rf100vl-dataset=sample --rf100vl-batch-size=8

    # run.yaml, used as: pytest --rf100vl-config=run.yaml
    matrix: {model: [owlv2:tiny], dataset: [sample]}
    loop: {batch-size: 8, attention: sdpa}      # attention: a key of the file and the ini only

    config = load_config("run.yaml")        # pytest_rf100vl.load_config
    pytest.main(config.to_args())

The command line wins over the file, and the file over the ini file.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf.constants import DTYPES
from rf100vl_hf.controls import one_line
from rf100vl_hf.devices import DEVICE_HELP, check_device_name
from rf100vl_hf.errors import DataError, shown
from rf100vl_hf.safepaths import read_file as safe_read
from rf100vl_hf.specs import ModelSpec
from rf100vl_hf.training.recipe import parse_key_values, parse_seeds, regime_of

from pytest_rf100vl.core.options import FILE, Option, dict_options, fields_with_options, option, options_of

DEFAULT_RESULTS = Path(".rf100vl") / "results"
AUTO_BATCH = "auto"
"""``--rf100vl-batch-size auto``: the largest batch that fits on the GPU (``engine/batch_size.py``)."""
CONFIG_OPTION = Option("config", "path", "a YAML file of options, by section (matrix, loop, training, report "
                       "and each benchmark's: rf100vl, uouo), where every option of a run is a key; the command "
                       "line wins over it, and it over the ini file (docs/cli.md)", "FILE")


@dataclass(frozen=True)
class AdapterOption:
    """``--rf100vl-adapter-option [NAME.]KEY=VALUE``; ``adapter`` is ``None`` for every model."""

    adapter: str | None
    key: str
    value: str

    def __str__(self) -> str:
        return f"{self.adapter + '.' if self.adapter else ''}{self.key}={self.value}"


def with_adapter_options(spec: ModelSpec, adapter_options: Sequence[AdapterOption] = (),
                         defaults: Mapping[str, Mapping[str, str]] | None = None) -> ModelSpec:
    """``spec`` with the adapter options given for it: every model's first, then its name's own,
    over ``defaults`` (adapter name -> options a kind's settings give it: a scoring protocol's)."""
    general = {o.key: o.value for o in adapter_options if o.adapter is None}
    own = {o.key: o.value for o in adapter_options if o.adapter == spec.name}
    return spec.with_options({**(defaults or {}).get(spec.name, {}), **general, **own})


def _shard(value: str) -> tuple[int, int]:
    part, slash, count = value.partition("/")
    if not (slash and part.strip().isdigit() and count.strip().isdigit() and 1 <= int(part) <= int(count)):
        raise ValueError(f"expected I/N with 1 <= I <= N, e.g. 1/4, got {shown(value)}")
    return int(part), int(count)


def _batch_size(value: str) -> int | str:
    text = value.strip().lower()
    if text == AUTO_BATCH:
        return AUTO_BATCH
    try:
        size = int(text)
    except ValueError:
        raise ValueError(f"expected a number of images or {AUTO_BATCH}, got {shown(value)}") from None
    if size < 1:
        raise ValueError(f"must be at least 1 (or {AUTO_BATCH}), got {size}")
    return size


def _folder(value: Path) -> Path:
    """An option check: a folder to write in (made when missing), refused when a file or a
    device (``/dev/null``) stands in its place, before any pair runs."""
    if value.exists() and not value.is_dir():
        raise ValueError(f"{value} is a file, not a folder")
    return value


def fraction(value: float) -> float:
    """An option check: a fraction in [0, 1]."""
    if not 0 <= value <= 1:
        raise ValueError(f"expected a fraction in [0, 1], got {value:g}")
    return value


def _train_split(value: str) -> str:
    regime_of(value)  # a ValueError names the known splits
    return value


def _adapter_option_items(values: tuple[str, ...]) -> tuple[AdapterOption, ...]:
    """An option check: ``[NAME.]KEY=VALUE`` items (a NAME is checked against the run's models
    by :func:`build_config`)."""
    parsed = []
    for value in values:
        target, sep, text = value.partition("=")
        adapter, _, key = target.strip().rpartition(".")
        if not sep or not key.isidentifier():
            raise ValueError(f"expected [NAME.]KEY=VALUE, got {shown(value)}")
        parsed.append(AdapterOption(adapter or None, key, text.strip()))
    return tuple(parsed)


@dataclass(frozen=True)
class MatrixConfig:
    """What runs: every model on every dataset, or a part of that matrix."""

    models: tuple[ModelSpec, ...] = option(
        "model", "list", "adapter spec NAME[:CHECKPOINT_OR_PATH] (repeatable), e.g. owlv2 or owlv2:tiny", "SPEC")
    datasets: tuple[str, ...] = option(
        "dataset", "list", "datasets to run, comma-separated or repeated: names ('sample' is the embedded one), "
        "domain:NAME (every catalogue dataset of a domain; domain:custom, the other exports of the data folder), "
        "rf20vl or all (default with a model: all)", "NAMES", split=True)
    adapter_options: tuple[AdapterOption, ...] = option(
        "adapter-option", "list", "pass KEY=VALUE to every model's adapter, or NAME.KEY=VALUE to the adapter NAME "
        "only (repeatable; values are strings the adapter parses)", "[NAME.]KEY=VALUE",
        check=_adapter_option_items)
    shard: tuple[int, int] | None = option(
        "shard", "str", "run part I of N of the matrix (size-balanced, the same on every machine), e.g. 1/4", "I/N",
        check=_shard, show=lambda value: f"{value[0]}/{value[1]}")
    limit: int | None = option(
        "limit", "int", "run each pair on the first N images of its split only, a quick check: its row is marked "
        "limit=N, never merged with or reused for a full run (default: every image)", "N", minimum=1)
    rerun: bool = option(
        "rerun", "flag", "run every pair even when the results folder has its finished row (default: reuse it)")


@dataclass(frozen=True)
class LoopConfig:
    """How the inference loop runs each model: where, in what precision, how many images a call."""

    device: str = option("device", "str", f"{DEVICE_HELP} (default: auto)", "DEVICE", default="auto",
                         check=check_device_name)
    dtype: str = option("dtype", "str", "float32, float16 or bfloat16 (default: float32)", "DTYPE",
                        default="float32", choices=DTYPES)
    batch_size: int | str = option(
        "batch-size", "str", "images per adapter call, or auto: on CUDA the largest batch that fits, found once per "
        "model (default: 1)", "N|auto", default=1, check=_batch_size)
    attention: str | None = option(
        "attention", "str", "attention implementation of transformers models: sdpa, eager, flash_attention_2... "
        "(default: transformers' choice, SDPA where the model has it; recorded in each row)", "NAME", via=FILE)
    compile: bool = option(
        "compile", "flag", "run each transformers detector's forward through torch.compile; the compile time falls "
        "in the warm-up, out of the throughput, and is recorded as compile_s", via=FILE)
    device_map: str | None = option(
        "device-map", "str", "spread each transformers model over every visible device with accelerate's device "
        "map: auto (for models larger than one GPU; recorded in each row)", "auto", choices=("auto",), via=FILE)
    cache: Path | str | None = option("cache", "path", "answer cache folder, or 'off' (default: <results>/answers)",
                                      "DIR|off", keywords=("off",), via=FILE)
    warmup_batches: int = option("warmup-batches", "int", "model calls of each round timed apart from the throughput "
                                 "(default: 2)", "N", default=2, minimum=1, via=FILE)


@dataclass(frozen=True)
class TrainingConfig:
    """Fine-tuning each model before it is scored (the README's "Data regimes")."""

    split: str | None = option(
        "train", "str", "fine-tune each model on this split first, then score it on --rf100vl-split: fewshot_10 "
        "(few-shot), semisup_10 (semi-supervised) or train (fully supervised); weights are kept in "
        "<results>/trained and reused (default: none, the model as it comes)", "SPLIT", check=_train_split)
    recipe: str | None = option(
        "recipe", "str", "the recipe to fine-tune by (default: the model's recipe for the regime; the README's "
        "'Data regimes' lists each model's recipes)", "NAME", via=FILE)
    options: Mapping[str, str] = option(
        "train-option", "list", "override a hyper-parameter of the recipe, KEY=VALUE (repeatable): epochs, "
        "batch_size, learning_rate, weight_decay, max_grad_norm, federated, mixed_precision (no, fp16, bf16), "
        "grad_accumulation, or the recipe's own", "KEY=VALUE", check=parse_key_values)
    seeds: tuple[int, ...] = option(
        "seeds", "str", "fit each trained pair once per seed, one test each: 0-9 or 0,3,7 (default: 0); the summary "
        "gives the spread over seeds", "SEEDS", default=(), check=parse_seeds,
        show=lambda seeds: ",".join(map(str, seeds)), via=FILE)


@dataclass(frozen=True)
class ReportConfig:
    """Where the results go, and what fails a run."""

    results: Path = option("results", "path", f"folder of results files (default: {DEFAULT_RESULTS})", "DIR",
                           default=DEFAULT_RESULTS, check=_folder)
    thresholds: Path | None = option(
        "thresholds", "path", "CSV of thresholds: model,target and min_ap (target: dataset, domain, All, or * for "
        "every pair), min_accuracy or min_miou (target: uouo-random, uouo-mmd or *) columns", "FILE", via=FILE)
    max_failed_fraction: float = option(
        "max-failed-fraction", "float", "a pair fails when the model failed (raised) on more than this fraction of "
        "its images (default: 0, any failed image fails the pair)", "F", default=0.0, check=fraction, via=FILE)
    allow_empty: bool = option(
        "allow-empty", "flag", "exit 0 when no pair ran (every dataset missing, every pair left out); by default "
        "such a run exits 5 with a line saying why", via=FILE)
    log_samples: bool = option(
        "log-samples", "flag", "write, per image, what each model that answers in text was sent and replied, the "
        "boxes read and why any was dropped, to <split>.samples.jsonl beside its predictions (the row's "
        "samples_file)", via=FILE)
    wandb: str | None = option(
        "wandb", "str", "log this session to Weights & Biases as one run of project PROJECT: each row as it finishes, "
        "then the summary's tables and plots (pip install \"rf100vl-hf[wandb]\"; WANDB_MODE=offline keeps it on "
        "disk); a failure is a warning", "PROJECT", via=FILE)
    mlflow: str | None = option(
        "mlflow", "str", "log this session to MLflow as one run at tracking URI (http(s)://, sqlite:///, file:): each "
        "row as it finishes, then the summary's tables and plots (pip install \"rf100vl-hf[mlflow]\"); a failure is "
        "a warning", "URI", via=FILE)


SECTIONS: dict[str, type] = {"matrix": MatrixConfig, "loop": LoopConfig, "training": TrainingConfig,
                             "report": ReportConfig}


@dataclass(frozen=True)
class RunConfig:
    """Everything a run was asked for, validated (see the module docstring)."""

    matrix: MatrixConfig = MatrixConfig()
    loop: LoopConfig = LoopConfig()
    training: TrainingConfig = TrainingConfig()
    report: ReportConfig = ReportConfig()
    kinds: Mapping[str, Any] = field(default_factory=dict)
    """Benchmark kind name -> its own options section (``BenchmarkKind.options``)."""

    @property
    def active(self) -> bool:
        """Whether the matrix runs: a model or a dataset was given."""
        return bool(self.matrix.models or self.matrix.datasets)

    def kind(self, name: str) -> Any:
        """The options section of benchmark kind ``name``."""
        return self.kinds[name]

    def _values(self) -> Iterator[tuple[Option, Any]]:
        """Every option with its value here."""
        for section in (*(getattr(self, name) for name in SECTIONS), *self.kinds.values()):
            for name, declared in fields_with_options(type(section)):
                yield declared, getattr(section, name)

    def to_args(self) -> list[str]:
        """The command line that gives this configuration (``pytest.main(config.to_args())``):
        one ``--OPTION=VALUE`` per value that differs from its default."""
        return [arg for declared, value in self._values() for arg in declared.as_args(value)]

    def kind_args(self, name: str) -> list[str]:
        """The command-line arguments of benchmark kind ``name``'s options that differ from their defaults."""
        section = self.kinds[name]
        return [arg for attribute, declared in fields_with_options(type(section))
                for arg in declared.as_args(getattr(section, attribute))]

    def given(self) -> dict[str, Any]:
        """The options that differ from their defaults, by ``dest`` (their ini key)."""
        return {declared.dest: value for declared, value in self._values() if declared.as_args(value)}


Lookup = Callable[[str, str, Option], Any]
"""``lookup(section, field, option)``: the raw value given for an option (``None``: not given)."""


def build_config(lookup: Lookup, kind_sections: Mapping[str, type]) -> RunConfig:
    """The run's configuration from raw values, each parsed and checked by its option.

    ``kind_sections`` maps each benchmark kind to its options section."""
    def section(name: str, cls: type) -> Any:
        values = {attribute: declared.parse(lookup(name, attribute, declared))
                  for attribute, declared in fields_with_options(cls)}
        try:
            return cls(**values)
        except ValueError as exc:  # a check across options of the section (split parameters, say)
            raise pytest.UsageError(f"{name} options: {exc}") from None

    kinds = {name: section(name, cls) for name, cls in kind_sections.items()}
    defaults: dict[str, dict[str, str]] = {}
    for options in kinds.values():  # a kind's options section may give adapters defaults (a protocol's)
        for adapter, given in getattr(options, "adapter_defaults", dict)().items():
            defaults.setdefault(adapter, {}).update(given)
    matrix = section("matrix", MatrixConfig)
    specs = tuple(ModelSpec.parse(text) for text in matrix.models)
    adapter_options = _adapter_options(matrix.adapter_options, specs)
    matrix = dataclasses.replace(
        matrix, adapter_options=adapter_options,
        models=tuple(with_adapter_options(spec, adapter_options, defaults) for spec in specs))
    config = RunConfig(
        matrix=matrix, loop=section("loop", LoopConfig), training=section("training", TrainingConfig),
        report=section("report", ReportConfig), kinds=kinds,
    )
    if config.active and not config.matrix.models:
        raise pytest.UsageError("--rf100vl-model is required to run the matrix (e.g. --rf100vl-model owlv2:tiny)")
    if config.training.seeds and config.training.split is None:
        raise pytest.UsageError("training.seeds: seeds are for fine-tuning; add --rf100vl-train SPLIT")
    return config


def _adapter_options(given: tuple[AdapterOption, ...], models: tuple[ModelSpec, ...]) -> tuple[AdapterOption, ...]:
    """The adapter options, each NAME the adapter name of a model of the run."""
    names = {spec.name for spec in models}
    for item in given:
        if item.adapter and item.adapter not in names:
            raise pytest.UsageError(
                f"--rf100vl-adapter-option {shown(str(item))}: no model named {shown(item.adapter)} in this run "
                f"(models: {', '.join(sorted(names)) or 'none'})"
            )
    return given


def all_options(kind_sections: Mapping[str, type]) -> tuple[Option, ...]:
    """Every option of a run: the config file's, the core sections', each kind's, and the dict
    options through which a kind's other options are given."""
    declared = (*(o for cls in SECTIONS.values() for o in options_of(cls)),
                *(o for cls in kind_sections.values() for o in options_of(cls)))
    return (CONFIG_OPTION, *declared, *dict_options(declared))


GONE = {
    "--rf100vl-domain": "--rf100vl-dataset=domain:NAME",
    "--rf100vl-subset": "--rf100vl-dataset=rf20vl (or all)",
    "--rf100vl-min-ap": "a thresholds-file row with target * (report.thresholds)",
    "--uouo-min-accuracy": "a thresholds-file row with target * (report.thresholds)",
    "--uouo-min-miou": "a thresholds-file row with target * (report.thresholds)",
    "--rf100vl-push-results": "rf100vl-hf results push DIR --repo-id ORG/NAME, after the session",
    "--rf100vl-min-time": "pytest-benchmark's --benchmark-max-time",
    "--rf100vl-max-rounds": "pytest-benchmark's --benchmark-min-rounds (--benchmark-disable: one round)",
}
"""Flags the command line no longer has, with what replaced each."""


def moved_flags(options: Sequence[Option]) -> dict[str, str]:
    """Each flag the command line no longer has (an option's, now a key) -> how to give it now."""
    moved = dict(GONE)
    for declared in options:
        if declared.via == FILE:
            moved[f"--{declared.prefix}-{declared.name}"] = f"--override-ini={declared.dest}=VALUE"
        elif declared.via:
            moved[f"--{declared.prefix}-{declared.name}"] = f"--{declared.prefix}-{declared.via}={declared.name}=VALUE"
    return moved


MOVED = {"minimums": "a minimum for every pair is a thresholds file's row with target * (report.thresholds)"}
"""Sections a config file no longer has, with where their values went."""
MAX_FILE_BYTES = 2**20
"""The largest ``--rf100vl-config`` file read (a run's options take a few hundred bytes)."""
MAX_FILE_VALUES = 10_000
"""The most values a ``--rf100vl-config`` file may hold once its YAML aliases are expanded: an
alias bomb of a few hundred bytes expands to hundreds of millions."""


@functools.cache
def _loader() -> type:
    """PyYAML's safe loader, stricter: a key given twice in a mapping is an error rather than
    the last one winning, ``1:30`` is text rather than YAML 1.1's base-60 number 90, and a
    document that holds more than :data:`MAX_FILE_VALUES` values with its aliases expanded
    (or an alias inside itself) is refused before anything is built from it."""
    import yaml

    class ConfigLoader(yaml.SafeLoader):
        def compose_document(self) -> Any:
            document = super().compose_document()
            _bound_values(document, yaml.SequenceNode, yaml.MappingNode)
            return document

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise ValueError(f"duplicate key {shown(key.value)} (line {key.start_mark.line + 1})")
                    seen.add(key.value)
            return super().construct_mapping(node, deep=deep)

        def construct_base_60(self, node: Any) -> Any:
            built = {"tag:yaml.org,2002:int": yaml.SafeLoader.construct_yaml_int,
                     "tag:yaml.org,2002:float": yaml.SafeLoader.construct_yaml_float}[node.tag]
            return self.construct_scalar(node) if ":" in node.value else built(self, node)

    for tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
        ConfigLoader.add_constructor(tag, ConfigLoader.construct_base_60)
    return ConfigLoader


def _bound_values(document: Any, *containers: type) -> None:
    """Count the values of a composed YAML document, an alias as often as it is used; a
    ``ValueError`` past :data:`MAX_FILE_VALUES` (so a cycle of aliases ends too)."""
    count, stack = 0, [document]
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_FILE_VALUES:
            raise ValueError(f"holds more than {MAX_FILE_VALUES} values once its aliases are expanded")
        if isinstance(node, containers):
            stack.extend(item for entry in node.value for item in (entry if isinstance(entry, tuple) else (entry,)))


def read_file(path: Path, kind_sections: Mapping[str, type]) -> dict[tuple[str, str], Any]:
    """A config file's values by (section, field): keys are the options' names (``batch-size``
    or ``batch_size``, not both), paths relative to the file's folder. Only a regular file of
    at most :data:`MAX_FILE_BYTES` is read (not a FIFO, nor ``/dev/zero``), by a strict YAML
    loader (:func:`_loader`). An unknown section or key, a bad value, or a file that is no
    YAML mapping, is a one-line usage error naming the file and the key."""
    import yaml

    where = f"{CONFIG_OPTION.flag} {path}"
    try:
        text = safe_read(Path(path), limit=MAX_FILE_BYTES).decode("utf-8")
        loaded = yaml.load(text, Loader=_loader())  # noqa: S506 (a safe loader: _loader)
    except DataError as exc:
        raise pytest.UsageError(f"{where}: {exc.reason}") from None
    except (UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
        raise pytest.UsageError(f"{where}: cannot read it: {one_line(exc)}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise pytest.UsageError(f"{where}: expected a mapping of sections, got {type(loaded).__name__}")
    known = {name: dict(fields_with_options(cls)) for name, cls in {**SECTIONS, **kind_sections}.items()}
    values: dict[tuple[str, str], Any] = {}
    given_as: dict[tuple[str, str], str] = {}
    for section, entries in loaded.items():
        if section not in known:
            moved = f"; {MOVED[section]}" if section in MOVED else ""
            raise pytest.UsageError(f"{where}: unknown section {shown(section)} (sections: {', '.join(known)}){moved}")
        if not isinstance(entries, dict):
            raise pytest.UsageError(f"{where}: section {shown(section)} must be a mapping")
        by_name = {**{o.name: a for a, o in known[section].items()}, **{a: a for a in known[section]}}
        for key, value in entries.items():
            attribute = by_name.get(str(key)) or by_name.get(str(key).replace("_", "-"))
            if attribute is None:
                named = key if isinstance(key, str) and len(key) <= 80 else shown(key)
                raise pytest.UsageError(f"{where}: unknown key {section}.{named} "
                                        f"(keys: {', '.join(o.name for o in known[section].values())})")
            if (section, attribute) in values:
                raise pytest.UsageError(f"{where}: {section}.{attribute} is given twice "
                                        f"(as {given_as[(section, attribute)]} and {key})")
            declared = known[section][attribute]
            value = declared.relative_to(Path(path).parent, value)
            try:
                declared.parse(value)
            except pytest.UsageError as exc:
                raise pytest.UsageError(f"{where}: {section}.{key}: {exc}") from None
            values[(section, attribute)], given_as[(section, attribute)] = value, str(key)
    return values
