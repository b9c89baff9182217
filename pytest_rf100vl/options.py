"""The plugin's options: one table drives ``pytest --help``, the ini keys and :class:`Settings`.

Every option ``--rf100vl-NAME`` has the ini equivalent ``rf100vl_NAME`` (with ``-`` as ``_``);
the command line wins over the ini file. This module imports nothing heavy: it runs in every
pytest session that has the plugin installed.
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


OPTIONS: tuple[Option, ...] = (
    Option("model", "list", "adapter spec NAME[:CHECKPOINT_OR_PATH] (repeatable), e.g. owlv2 or owlv2:tiny", "SPEC"),
    Option("dataset", "list", "datasets to run, comma-separated or repeated ('sample' is the embedded one)", "NAMES",
           split=True),
    Option("domain", "list", "every catalogue dataset of these domains ('custom': the other exports of the data dir)",
           "DOMAINS", split=True),
    Option("subset", "str", "every catalogue dataset of a subset: all or rf20vl", "SUBSET"),
    Option("split", "str", "split to evaluate (default: test)", "SPLIT"),
    Option("data-dir", "path", "root of the full exports (default: $RF100VL_DATA_DIR or the cache home)", "DIR"),
    Option("fewshot-dir", "path", "root of the official few-shot exports (default: $RF100VL_FEWSHOT_DIR)", "DIR"),
    Option("device", "str", "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps (default: auto)", "DEVICE"),
    Option("dtype", "str", "float32, float16 or bfloat16 (default: float32)", "DTYPE"),
    Option("batch-size", "int", "images per adapter call (default: 1)", "N"),
    Option("prompt", "str", "names, instructions or fewshot (default: names)", "MODE"),
    Option("results", "path", f"folder of results files (default: {DEFAULT_RESULTS})", "DIR"),
    Option("min-ap", "float", "minimum AP50:95, in percent, for every pair without a more specific threshold", "AP"),
    Option("thresholds", "path", "CSV of thresholds: model,target,min_ap (target: dataset, domain or All)", "FILE"),
    Option("reference", "str", "compare each complete domain's mean with a published table: paper", "TABLE"),
    Option("tolerance", "float", "allowed distance, in AP points, from the reference table (default: 1.0)", "AP"),
    Option("reference-method", "list", "map a model to a row of the reference table: SPEC=ROW (repeatable)",
           "SPEC=ROW"),
)


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

    @property
    def active(self) -> bool:
        return bool(self.models or self.datasets or self.domains or self.subset)


def dest(option: Option) -> str:
    return "rf100vl_" + option.name.replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    """Register every option on the command line and in the ini file."""
    group = parser.getgroup(GROUP, "rf100vl: benchmark (model x dataset) pairs of RF100-VL")
    for option in OPTIONS:
        flag = "--rf100vl-" + option.name
        if option.kind == "list":
            group.addoption(flag, action="append", dest=dest(option), metavar=option.metavar, help=option.help)
        else:
            group.addoption(flag, dest=dest(option), metavar=option.metavar, help=option.help)
        ini_type = {"list": "linelist", "path": "paths"}.get(option.kind, "string")
        parser.addini(dest(option), option.help, type=ini_type, default=[] if ini_type != "string" else "")


def _raw(config: pytest.Config, option: Option) -> Any:
    """The command-line value, else the ini value, else ``None``; paths resolved."""
    value = config.getoption(dest(option))
    if value is not None:
        if option.kind == "path":
            return config.invocation_params.dir / Path(value).expanduser()
        return value
    ini = config.getini(dest(option))
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
        raise pytest.UsageError(f"--rf100vl-{option.name}: expected a number, got {value!r}") from None


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


def read_settings(config: pytest.Config) -> Settings:
    """The validated settings of this session; a bad value is a usage error naming the option."""
    raw = {option.name: _raw(config, option) for option in OPTIONS}
    by_name = {option.name: option for option in OPTIONS}
    lists = {o.name: _items(raw[o.name], o.split) for o in OPTIONS if o.kind == "list"}
    device = raw["device"] or "auto"
    if not _DEVICE.match(device):
        raise pytest.UsageError(f"--rf100vl-device: {device!r} is not auto, cpu, mps, cuda or cuda:N")
    batch_size = _number(by_name["batch-size"], raw["batch-size"])
    if batch_size is not None and batch_size < 1:
        raise pytest.UsageError(f"--rf100vl-batch-size: must be at least 1, got {batch_size}")
    tolerance = _number(by_name["tolerance"], raw["tolerance"])
    settings = Settings(
        models=lists["model"],
        datasets=lists["dataset"],
        domains=lists["domain"],
        subset=_choice("subset", raw["subset"], SUBSETS, None),
        split=raw["split"] or "test",
        data_dir=raw["data-dir"],
        fewshot_dir=raw["fewshot-dir"],
        device=device,
        dtype=_choice("dtype", raw["dtype"], DTYPES, "float32") or "float32",
        batch_size=int(batch_size or 1),
        prompt=_choice("prompt", raw["prompt"], PROMPTS, "names") or "names",
        results=raw["results"] or config.invocation_params.dir / DEFAULT_RESULTS,
        min_ap=_number(by_name["min-ap"], raw["min-ap"]),
        thresholds=raw["thresholds"],
        reference=_choice("reference", raw["reference"], REFERENCES, None),
        tolerance=1.0 if tolerance is None else float(tolerance),
        reference_methods=_methods(lists["reference-method"]),
    )
    if settings.active and not settings.models:
        raise pytest.UsageError("--rf100vl-model is required to run the matrix (e.g. --rf100vl-model owlv2:tiny)")
    return settings
