"""The plugin's options: one table drives ``pytest --help``, the ini keys and :class:`Settings`.

Every option ``--rf100vl-NAME`` has the ini equivalent ``rf100vl_NAME`` and every
``--uouo-NAME`` the ini equivalent ``uouo_NAME`` (with ``-`` as ``_``); the command line wins
over the ini file. This module imports nothing heavy: it runs in every pytest session that
has the plugin installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

GROUP = "rf100vl"
DEFAULT_RESULTS = Path(".rf100vl") / "results"
PROMPTS = ("names", "instructions", "fewshot")
DTYPES = ("float32", "float16", "bfloat16")
SUBSETS = ("all", "rf20vl")
REFERENCES = ("paper",)
NO_WEIGHTS = "none"
"""``--uouo-clip-pretrained none``: CLIP with seeded random weights (for tests)."""
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


@dataclass(frozen=True)
class Option:
    """One option: ``kind`` is ``list`` (repeatable, comma-separated when ``split``),
    ``str``, ``int``, ``float`` or ``path``."""

    name: str
    kind: str
    help: str
    metavar: str
    split: bool = False
    prefix: str = "rf100vl"

    @property
    def flag(self) -> str:
        return f"--{self.prefix}-{self.name}"

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` and its ini key."""
        return f"{self.prefix}_{self.name.replace('-', '_')}"


OPTIONS: tuple[Option, ...] = (
    Option("model", "list", "adapter spec NAME[:CHECKPOINT_OR_PATH] (repeatable), e.g. owlv2 or owlv2:tiny", "SPEC"),
    Option("dataset", "list", "datasets to run, comma-separated or repeated ('sample' is the embedded one)", "NAMES",
           split=True),
    Option("domain", "list", "every catalogue dataset of these domains ('custom': the other exports of the data dir)",
           "DOMAINS", split=True),
    Option("subset", "str", "every catalogue dataset of a subset: all or rf20vl", "SUBSET"),
    Option("split", "str", "split to evaluate (default: test; UOUO datasets have only test)", "SPLIT"),
    Option("data-dir", "path", "root of the full exports (default: $RF100VL_DATA_DIR or the cache home)", "DIR"),
    Option("fewshot-dir", "path", "root of the official few-shot exports (default: $RF100VL_FEWSHOT_DIR)", "DIR"),
    Option("device", "str", "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps (default: auto)", "DEVICE"),
    Option("dtype", "str", "float32, float16 or bfloat16 (default: float32)", "DTYPE"),
    Option("batch-size", "int", "images per adapter call (default: 1)", "N"),
    Option("prompt", "str", "names, instructions or fewshot (default: names)", "MODE"),
    Option("results", "path", f"folder of results files (default: {DEFAULT_RESULTS})", "DIR"),
    Option("min-ap", "float", "minimum AP50:95, in percent, for every RF100-VL pair without a more specific "
           "threshold", "AP"),
    Option("thresholds", "path", "CSV of thresholds: model,target and min_ap (target: dataset, domain or All), "
           "min_accuracy or min_miou (target: uouo-random or uouo-mmd) columns", "FILE"),
    Option("reference", "str", "compare each complete domain's mean with a published table: paper", "TABLE"),
    Option("tolerance", "float", "allowed distance, in AP points, from the reference table (default: 1.0)", "AP"),
    Option("reference-method", "list", "map a model to a row of the reference table: SPEC=ROW (repeatable)",
           "SPEC=ROW"),
    Option("adapter-option", "list", "pass KEY=VALUE to every model's adapter, or NAME.KEY=VALUE to the adapter "
           "NAME only (repeatable; values are strings the adapter parses)", "[NAME.]KEY=VALUE"),
    Option("source", "path", "folder of UOUO cut-outs (default: $UOUO_SOURCE_DIR, else <cache home>/uouo-source "
           "when it exists, else the embedded sample)", "DIR", prefix="uouo"),
    Option("num-mosaics", "int", "mosaics per UOUO dataset (default: 200)", "N", prefix="uouo"),
    Option("seed", "int", "seed of the UOUO mosaics (default: 0)", "N", prefix="uouo"),
    Option("clip-model", "str", "open_clip model that ranks the hard mosaics' neighbours (default: ViT-B-32)",
           "NAME", prefix="uouo"),
    Option("clip-pretrained", "str", "its weights: an open_clip tag, a local weights file, or 'none' for seeded "
           "random weights (default: laion2b_s34b_b79k, downloaded once)", "TAG_OR_FILE", prefix="uouo"),
    Option("min-accuracy", "float", "minimum UOUO quadrant accuracy, a fraction in [0, 1], for every UOUO pair "
           "without a more specific threshold", "FRACTION", prefix="uouo"),
    Option("min-miou", "float", "minimum UOUO mIoU, a fraction in [0, 1], for every UOUO pair without a more "
           "specific threshold", "FRACTION", prefix="uouo"),
)


@dataclass(frozen=True)
class AdapterOption:
    """``--rf100vl-adapter-option [NAME.]KEY=VALUE``; ``adapter`` is ``None`` for every model."""

    adapter: str | None
    key: str
    value: str


@dataclass(frozen=True)
class Settings:
    """What the user asked for, validated; ``active`` when any matrix option is set."""

    models: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    subset: str | None = None
    split: str = "test"
    data_dir: Path | None = None
    fewshot_dir: Path | None = None
    device: str = "auto"
    dtype: str = "float32"
    batch_size: int = 1
    prompt: str = "names"
    results: Path = DEFAULT_RESULTS
    min_ap: float | None = None
    thresholds: Path | None = None
    reference: str | None = None
    tolerance: float = 1.0
    reference_methods: dict[str, str] = field(default_factory=dict)
    adapter_options: tuple[AdapterOption, ...] = ()
    uouo_source: Path | None = None
    uouo_num_mosaics: int | None = None
    uouo_seed: int | None = None
    uouo_clip_model: str | None = None
    uouo_clip_pretrained: str | None = None  # NO_WEIGHTS for random weights
    uouo_min_accuracy: float | None = None
    uouo_min_miou: float | None = None

    @property
    def active(self) -> bool:
        return bool(self.models or self.datasets or self.domains or self.subset)

    def options_for(self, spec: str) -> dict[str, str]:
        """The adapter options of model ``spec``: those for every model, then its name's own."""
        name = spec.partition(":")[0].strip()
        general = {o.key: o.value for o in self.adapter_options if o.adapter is None}
        return {**general, **{o.key: o.value for o in self.adapter_options if o.adapter == name}}

    def uouo_parameters(self) -> dict[str, Any]:
        """What ``load_uouo`` is given besides the config: only what the user set (the rest
        keeps ``load_uouo``'s defaults, so the bare ``load_dataset`` route finds the same build)."""
        given = {
            "source_dir": self.uouo_source,
            "num_mosaics": self.uouo_num_mosaics,
            "seed": self.uouo_seed,
            "clip_model": self.uouo_clip_model,
            "clip_pretrained": self.uouo_clip_pretrained,
        }
        parameters = {key: value for key, value in given.items() if value is not None}
        if self.uouo_clip_pretrained == NO_WEIGHTS:
            parameters["clip_pretrained"] = None
        return parameters


def add_options(parser: pytest.Parser) -> None:
    """Register every option on the command line and in the ini file."""
    group = parser.getgroup(GROUP, "rf100vl: benchmark (model x dataset) pairs of RF100-VL and UOUO")
    for option in OPTIONS:
        if option.kind == "list":
            group.addoption(option.flag, action="append", dest=option.dest, metavar=option.metavar, help=option.help)
        else:
            group.addoption(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
        ini_type = {"list": "linelist", "path": "paths"}.get(option.kind, "string")
        parser.addini(option.dest, option.help, type=ini_type, default=[] if ini_type != "string" else "")


def _raw(config: pytest.Config, option: Option) -> Any:
    """The command-line value, else the ini value, else ``None``; paths resolved."""
    value = config.getoption(option.dest)
    if value is not None:
        if option.kind == "path":
            return config.invocation_params.dir / Path(value).expanduser()
        return value
    ini = config.getini(option.dest)
    if option.kind == "path":
        return ini[0] if ini else None
    return ini or None


def _items(values: list[str] | None, split: bool) -> tuple[str, ...]:
    out: list[str] = []
    for value in values or []:
        parts = value.split(",") if split else [value]
        out.extend(p.strip() for p in parts if p.strip())
    return tuple(dict.fromkeys(out))


def _number(option: Option, value: Any) -> float | int | None:
    if value is None:
        return None
    try:
        return int(value) if option.kind == "int" else float(value)
    except ValueError:
        raise pytest.UsageError(f"{option.flag}: expected a number, got {value!r}") from None


def _fraction(option: Option, value: Any) -> float | None:
    """A minimum of a UOUO rate: a fraction in [0, 1], as the UOUO paper's Table 1 reports them."""
    number = _number(option, value)
    if number is not None and not 0 <= number <= 1:
        raise pytest.UsageError(f"{option.flag}: expected a fraction in [0, 1] (as in UOUO's Table 1), got {value}")
    return number


def _choice(name: str, value: str | None, choices: tuple[str, ...], default: str | None) -> str | None:
    if value is None:
        return default
    if value not in choices:
        raise pytest.UsageError(f"--rf100vl-{name}: {value!r} is not one of {', '.join(choices)}")
    return value


def _methods(values: tuple[str, ...]) -> dict[str, str]:
    methods = {}
    for value in values:
        spec, sep, row = value.partition("=")
        if not sep or not spec.strip() or not row.strip():
            raise pytest.UsageError(f"--rf100vl-reference-method: expected SPEC=ROW, got {value!r}")
        methods[spec.strip()] = row.strip()
    return methods


def _adapter_options(values: tuple[str, ...], models: tuple[str, ...]) -> tuple[AdapterOption, ...]:
    """``[NAME.]KEY=VALUE`` items; a NAME must be the adapter name of a model of the run."""
    names = {spec.partition(":")[0].strip() for spec in models}
    parsed = []
    for value in values:
        target, sep, text = value.partition("=")
        adapter, _, key = target.strip().rpartition(".")
        if not sep or not key.isidentifier():
            raise pytest.UsageError(f"--rf100vl-adapter-option: expected [NAME.]KEY=VALUE, got {value!r}")
        if adapter and adapter not in names:
            raise pytest.UsageError(
                f"--rf100vl-adapter-option {value!r}: no model named {adapter!r} in this run "
                f"(models: {', '.join(sorted(names)) or 'none'})"
            )
        parsed.append(AdapterOption(adapter or None, key, text.strip()))
    return tuple(parsed)


def _folder(option: Option, value: Path | None) -> Path | None:
    if value is not None and not Path(value).is_dir():
        raise pytest.UsageError(f"{option.flag}: {value} is not a folder")
    return value


def read_settings(config: pytest.Config) -> Settings:
    """The validated settings of this session; a bad value is a usage error naming the option."""
    raw = {option.flag: _raw(config, option) for option in OPTIONS}
    by_flag = {option.flag: option for option in OPTIONS}
    lists = {o.flag: _items(raw[o.flag], o.split) for o in OPTIONS if o.kind == "list"}
    device = raw["--rf100vl-device"] or "auto"
    if not _DEVICE.match(device):
        raise pytest.UsageError(f"--rf100vl-device: {device!r} is not auto, cpu, mps, cuda or cuda:N")
    batch_size = _number(by_flag["--rf100vl-batch-size"], raw["--rf100vl-batch-size"])
    if batch_size is not None and batch_size < 1:
        raise pytest.UsageError(f"--rf100vl-batch-size: must be at least 1, got {batch_size}")
    num_mosaics = _number(by_flag["--uouo-num-mosaics"], raw["--uouo-num-mosaics"])
    if num_mosaics is not None and num_mosaics < 1:
        raise pytest.UsageError(f"--uouo-num-mosaics: must be at least 1, got {num_mosaics}")
    seed = _number(by_flag["--uouo-seed"], raw["--uouo-seed"])
    if seed is not None and seed < 0:
        raise pytest.UsageError(f"--uouo-seed: must be at least 0, got {seed}")
    tolerance = _number(by_flag["--rf100vl-tolerance"], raw["--rf100vl-tolerance"])
    settings = Settings(
        models=lists["--rf100vl-model"],
        datasets=lists["--rf100vl-dataset"],
        domains=lists["--rf100vl-domain"],
        subset=_choice("subset", raw["--rf100vl-subset"], SUBSETS, None),
        split=raw["--rf100vl-split"] or "test",
        data_dir=raw["--rf100vl-data-dir"],
        fewshot_dir=raw["--rf100vl-fewshot-dir"],
        device=device,
        dtype=_choice("dtype", raw["--rf100vl-dtype"], DTYPES, "float32") or "float32",
        batch_size=int(batch_size or 1),
        prompt=_choice("prompt", raw["--rf100vl-prompt"], PROMPTS, "names") or "names",
        results=raw["--rf100vl-results"] or config.invocation_params.dir / DEFAULT_RESULTS,
        min_ap=_number(by_flag["--rf100vl-min-ap"], raw["--rf100vl-min-ap"]),
        thresholds=raw["--rf100vl-thresholds"],
        reference=_choice("reference", raw["--rf100vl-reference"], REFERENCES, None),
        tolerance=1.0 if tolerance is None else float(tolerance),
        reference_methods=_methods(lists["--rf100vl-reference-method"]),
        adapter_options=_adapter_options(lists["--rf100vl-adapter-option"], lists["--rf100vl-model"]),
        uouo_source=_folder(by_flag["--uouo-source"], raw["--uouo-source"]),
        uouo_num_mosaics=None if num_mosaics is None else int(num_mosaics),
        uouo_seed=None if seed is None else int(seed),
        uouo_clip_model=raw["--uouo-clip-model"],
        uouo_clip_pretrained=raw["--uouo-clip-pretrained"],
        uouo_min_accuracy=_fraction(by_flag["--uouo-min-accuracy"], raw["--uouo-min-accuracy"]),
        uouo_min_miou=_fraction(by_flag["--uouo-min-miou"], raw["--uouo-min-miou"]),
    )
    if settings.active and not settings.models:
        raise pytest.UsageError("--rf100vl-model is required to run the matrix (e.g. --rf100vl-model owlv2:tiny)")
    return settings
