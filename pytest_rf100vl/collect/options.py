"""The plugin's options: one table per owner drives ``pytest --help``, the ini keys and the values.

The core options (:data:`CORE_OPTIONS`: models, datasets, device, results, ...) are defined
here; each benchmark kind adds its own table (``BenchmarkKind.options``). Every option
``--PREFIX-NAME`` has the ini equivalent ``PREFIX_NAME`` (``-`` as ``_``); the command line
wins over the ini file. A value is parsed and checked once, by its option, so a bad value is
a usage error naming the option. This module imports nothing heavy: it runs in every pytest
session that has the plugin installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from rf100vl_hf.constants import DTYPES
from rf100vl_hf.devices import DEVICE_HELP, check_device_name

from pytest_rf100vl.core.settings import AUTO_BATCH, DEFAULT_RESULTS, AdapterOption, Option, Settings
from pytest_rf100vl.session.verdict import fraction

GROUP = "rf100vl"


def existing_folder(value: Path) -> Path:
    """A ``check`` for folders the run reads: one that does not exist is refused now."""
    if not Path(value).is_dir():
        raise ValueError(f"{value} is not a folder")
    return value


def _repo_id(value: str) -> str:
    if value.count("/") != 1 or not all(part.strip() for part in value.split("/")):
        raise ValueError(f"expected a Hub repository id ORG/NAME, got {value!r}")
    return value


def _shard(value: str) -> tuple[int, int]:
    part, slash, count = value.partition("/")
    if not (slash and part.strip().isdigit() and count.strip().isdigit() and 1 <= int(part) <= int(count)):
        raise ValueError(f"expected I/N with 1 <= I <= N, e.g. 1/4, got {value!r}")
    return int(part), int(count)


def _batch_size(value: str) -> int | str:
    text = value.strip().lower()
    if text == AUTO_BATCH:
        return AUTO_BATCH
    try:
        size = int(text)
    except ValueError:
        raise ValueError(f"expected a number of images or {AUTO_BATCH}, got {value!r}") from None
    if size < 1:
        raise ValueError(f"must be at least 1 (or {AUTO_BATCH}), got {size}")
    return size


def _device(value: str) -> str:
    return check_device_name(value)


CORE_OPTIONS: tuple[Option, ...] = (
    Option("model", "list", "adapter spec NAME[:CHECKPOINT_OR_PATH] (repeatable), e.g. owlv2 or owlv2:tiny", "SPEC"),
    Option("dataset", "list", "datasets to run, comma-separated or repeated ('sample' is the embedded one)", "NAMES",
           split=True),
    Option("device", "str", f"{DEVICE_HELP} (default: auto)", "DEVICE", default="auto", check=_device),
    Option("dtype", "str", "float32, float16 or bfloat16 (default: float32)", "DTYPE", default="float32",
           choices=DTYPES),
    Option("batch-size", "str", "images per adapter call, or auto: on CUDA the largest batch that fits, found "
           "once per model (default: 1)", "N|auto", default=1, check=_batch_size),
    Option("attention", "str", "attention implementation of transformers models: sdpa, eager, flash_attention_2... "
           "(default: transformers' choice, SDPA where the model has it; recorded in each row)", "NAME"),
    Option("compile", "flag", "run each transformers detector's forward through torch.compile; the compile time "
           "falls in the warm-up, out of the throughput, and is recorded as compile_s", "", default=False),
    Option("results", "path", f"folder of results files (default: {DEFAULT_RESULTS})", "DIR"),
    Option("thresholds", "path", "CSV of thresholds: model,target and min_ap (target: dataset, domain or All), "
           "min_accuracy or min_miou (target: uouo-random or uouo-mmd) columns", "FILE"),
    Option("push-results", "str", "push this session's rows to the Hub results dataset ORG/NAME when it ends "
           "(append-and-merge; a failed push is a warning with the command that retries it)", "ORG/NAME",
           check=_repo_id),
    Option("adapter-option", "list", "pass KEY=VALUE to every model's adapter, or NAME.KEY=VALUE to the adapter "
           "NAME only (repeatable; values are strings the adapter parses)", "[NAME.]KEY=VALUE"),
    Option("max-failed-fraction", "float", "a pair fails when the model failed (raised) on more than this fraction "
           "of its images (default: 0, any failed image fails the pair)", "F", default=0.0, check=fraction),
    Option("rerun", "flag", "run every pair even when the results folder has its finished row (default: reuse "
           "it)", "", default=False),
    Option("cache", "str", "answer cache folder, or 'off' (default: <results>/answers)", "DIR|off"),
    Option("shard", "str", "run part I of N of the matrix (size-balanced, the same on every machine), e.g. 1/4",
           "I/N", check=_shard),
    Option("device-map", "str", "spread each transformers model over every visible device with accelerate's "
           "device map: auto (for models larger than one GPU; recorded in each row)", "auto", choices=("auto",)),
    Option("warmup-batches", "int", "model calls timed apart from the throughput (default: 2)", "N", default=2,
           minimum=1),
    Option("min-time", "float", "a split whose steady state takes less is run again for throughput (answer cache "
           "off, output discarded) until the rounds add up to this many seconds (default: 10)", "SECONDS",
           default=10.0, minimum=0),
    Option("max-rounds", "int", "at most this many rounds of a split for throughput (default: 10; 1: never "
           "repeat)", "N", default=10, minimum=1),
    Option("allow-empty", "flag", "exit 0 when no pair ran (every dataset missing, every pair left out); by "
           "default such a run exits 5 with a line saying why", "", default=False),
    Option("max-requests", "int", "cap on the requests each served or API model may send in this session (its "
           "adapter option max_requests); images past it fail, unpaid and uncached (default: no cap)", "N",
           minimum=0),
    Option("limit", "int", "run each pair on the first N images of its split only, a quick check: its row is "
           "marked limit=N, never merged with or reused for a full run (default: every image)", "N", minimum=1),
)


def add_options(parser: pytest.Parser, options: tuple[Option, ...]) -> None:
    """Register options on the command line and in the ini file."""
    group = parser.getgroup(GROUP, "rf100vl: benchmark (model x dataset) pairs of RF100-VL and UOUO")
    for option in options:
        if option.kind == "list":
            group.addoption(option.flag, action="append", dest=option.dest, metavar=option.metavar, help=option.help)
        elif option.kind == "flag":
            group.addoption(option.flag, action="store_true", default=None, dest=option.dest, help=option.help)
        else:
            group.addoption(option.flag, dest=option.dest, metavar=option.metavar, help=option.help)
        ini_type = {"list": "linelist", "path": "paths", "flag": "bool"}.get(option.kind, "string")
        ini_default = {"string": "", "bool": False}.get(ini_type, [])
        parser.addini(option.dest, option.help, type=ini_type, default=ini_default)


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


def read_settings(
    config: pytest.Config,
    options: tuple[Option, ...],
    selectors: tuple[str, ...] = (),
    defaults: tuple[Callable[[Mapping[str, Any]], Mapping[str, Mapping[str, str]]], ...] = (),
) -> Settings:
    """The validated settings of this session over ``options`` (the core's and every kind's);
    ``selectors`` are the ``dest`` of kind options that select datasets on their own;
    ``defaults`` are the kinds' :meth:`BenchmarkKind.adapter_defaults`, given every value."""
    values = {option.dest: option.parse(_raw(config, option)) for option in options}
    adapter_defaults: dict[str, dict[str, str]] = {}
    for kind_defaults in defaults:
        for adapter, given in kind_defaults(values).items():
            adapter_defaults.setdefault(adapter, {}).update(given)
    models = values["rf100vl_model"]
    settings = Settings(
        models=models,
        datasets=values["rf100vl_dataset"],
        device=values["rf100vl_device"],
        dtype=values["rf100vl_dtype"],
        batch_size=values["rf100vl_batch_size"],
        results=values["rf100vl_results"] or config.invocation_params.dir / DEFAULT_RESULTS,
        thresholds=values["rf100vl_thresholds"],
        adapter_options=_adapter_options(values["rf100vl_adapter_option"], models),
        values=values,
        selecting=any(values[dest] for dest in selectors),
        adapter_defaults=adapter_defaults,
    )
    if settings.active and not settings.models:
        raise pytest.UsageError("--rf100vl-model is required to run the matrix (e.g. --rf100vl-model owlv2:tiny)")
    return settings


def check_rootdir(config: pytest.Config, options: tuple[Option, ...]) -> None:
    """Refuse a run whose rootdir one of these options moved.

    pytest chooses its rootdir (and ini file) before it loads plugins, so the value of a plugin
    option written apart from it (``--rf100vl-data-dir /data``) counts as a test path there:
    the rootdir becomes ``/data``, the project's ini file is not read, and ``.pytest_cache``
    is written there (pytest's documentation: a plugin option with a path makes ``args``
    mandatory). Nothing here can move it back, so the run stops before anything is written,
    saying how to write the option."""
    from _pytest.config.findpaths import determine_setup

    args = [str(arg) for arg in config.invocation_params.args]
    flags = {option.flag for option in options if option.kind != "flag"}
    here = config.invocation_params.dir
    values = {args[i + 1] for i, arg in enumerate(args[:-1])
              if arg in flags and not args[i + 1].startswith("-") and (here / args[i + 1]).exists()}
    given = [arg for arg in config.known_args_namespace.file_or_dir if arg not in values]
    if not values:
        return
    try:
        wanted = determine_setup(inifile=config.known_args_namespace.inifilename,
                                 override_ini=config.known_args_namespace.override_ini, args=given,
                                 rootdir_cmd_arg=config.known_args_namespace.rootdir or None,
                                 invocation_dir=here)[0]
    except Exception:  # pytest's rootdir search changed: nothing to compare with
        return
    if wanted == config.rootpath:
        return
    moved = [f"{args[i]} {args[i + 1]}" for i, arg in enumerate(args[:-1]) if arg in flags and args[i + 1] in values]
    fixed = " ".join(f"{arg.split(' ', 1)[0]}={arg.split(' ', 1)[1]}" for arg in moved)
    raise pytest.UsageError(
        f"{', '.join(moved)}: pytest took the path for a test path and chose the rootdir {config.rootpath} "
        f"instead of {wanted} (it decides before it knows plugin options); write {fixed}"
    )
