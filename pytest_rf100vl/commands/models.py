"""``rf100vl-hf models``: the registered model adapters (built-in, and installed through the
``rf100vl.adapters`` entry-point group) with their default checkpoints, prompt modes and the
benchmarks they answer. A built-in is read from its entry in the registry's table
(:class:`~pytest_rf100vl.adapters.registry.Listing`, which its class reads too), so the listing
imports no model library; an installed adapter has no entry there and is imported."""

from __future__ import annotations

import argparse
import importlib
import json
from dataclasses import asdict, dataclass
from functools import reduce

from rf100vl_hf.controls import one_line
from rf100vl_hf.errors import DataError, shown

from pytest_rf100vl.core.registry import RegistryError

ATTRIBUTES = ("default_checkpoint", "prompt_modes", "tasks")
HEADER = ("name", "default checkpoint", "prompt modes", "tasks", "from", "also")

DESCRIPTION = """\
List the model adapters a --rf100vl-model spec can name: the built-in ones and those other
packages register in the rf100vl.adapters entry-point group. For each: its default checkpoint
(NAME alone uses it; NAME:CHECKPOINT_OR_PATH picks another), the prompt modes it accepts
(--rf100vl-prompt), the benchmarks it answers (rf100vl: detection, uouo: grounding) and other
specs it takes: NAME:tiny (a random-weight model built offline, for a smoke run) and
checkpoints worth knowing by name (yolo:yolo26n.pt).
"""


@dataclass(frozen=True)
class AdapterInfo:
    """One adapter as listed; ``problem`` says why its class could not be read."""

    name: str
    target: str  # module:Class
    source: str  # "built-in", or the package that registers it
    default_checkpoint: str | None = None
    prompt_modes: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    problem: str | None = None
    spellings: tuple[str, ...] = ()
    """Other specs it takes: its offline ``:tiny`` variants and checkpoints worth knowing by name."""


def adapters() -> list[AdapterInfo]:
    """Every registered adapter, built-ins first (a name registered twice is an error)."""
    from importlib.metadata import entry_points

    from pytest_rf100vl.adapters.registry import BUILTIN, ENTRY_POINT_GROUP, available

    packages = {point.name: point.dist.name if point.dist is not None else "an entry point"
                for point in entry_points(group=ENTRY_POINT_GROUP)}
    listed = []
    for name, target in available().items():
        if name in BUILTIN:
            entry = BUILTIN[name]
            listed.append(AdapterInfo(name, target, "built-in", entry.default_checkpoint, entry.prompt_modes,
                                      entry.tasks, spellings=entry.spellings(name)))
            continue
        source = packages.get(name, "an entry point")
        try:
            values = class_attributes(target)
        except Exception as exc:  # a broken third-party module is listed with its error, not fatal
            listed.append(AdapterInfo(name, target, source, problem=f"{target}: {type(exc).__name__}: {exc}"))
            continue
        problem = _attribute_problem(values)
        if problem is not None:
            listed.append(AdapterInfo(name, target, source, problem=f"{target}: {problem}"))
            continue
        listed.append(AdapterInfo(name, target, source, values["default_checkpoint"],
                                  tuple(values["prompt_modes"]), tuple(values["tasks"])))
    return listed


def class_attributes(target: str) -> dict[str, object]:
    """The listed fields of the registry entry of the class ``module:Class`` (``Adapter.entry``),
    imported (its import errors propagate)."""
    module, _, qualname = target.partition(":")
    entry = reduce(getattr, qualname.split("."), importlib.import_module(module)).entry()
    return {name: getattr(entry, name) for name in ATTRIBUTES}


def _attribute_problem(values: dict[str, object]) -> str | None:
    """Why a class's entry cannot be listed (a checkpoint that is not text or ``None``,
    modes or tasks that are not a sequence of names), or ``None``."""

    checkpoint = values["default_checkpoint"]
    if checkpoint is not None and not isinstance(checkpoint, str):
        return f"default_checkpoint is {shown(checkpoint)}, not a name or None"
    for key in ("prompt_modes", "tasks"):
        names = values[key]
        if not isinstance(names, (tuple, list)) or not all(isinstance(item, str) for item in names):
            return f"{key} is {shown(names)}, not a tuple of names"
    return None


def table_lines(listed: list[AdapterInfo]) -> list[str]:
    """The listing as aligned text columns, problems below; what other packages wrote is shown
    as one line with its control characters escaped, so it cannot act on the terminal."""

    rows = [[one_line(cell) for cell in (a.name, a.default_checkpoint or "-", ", ".join(a.prompt_modes) or "-",
                                         ", ".join(a.tasks) or "-", a.source, ", ".join(a.spellings) or "-")]
            for a in listed]
    widths = [max(len(cell) for cell in column) for column in zip(HEADER, *rows)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [HEADER, *rows]]
    problems = [one_line(f"{a.name}: cannot be read: {a.problem}") for a in listed if a.problem]
    return lines + ([""] + problems if problems else [])


def cmd_models(args: argparse.Namespace) -> int:


    try:
        listed = adapters()
    except RegistryError as exc:
        raise DataError("entry points", "rf100vl.adapters", str(exc)) from None
    if args.format == "json":
        print(json.dumps([asdict(a) for a in listed], indent=2))
    else:
        print("\n".join(table_lines(listed)))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``models`` on the ``rf100vl-hf`` parser (entry point ``rf100vl.commands``)."""
    p = subparsers.add_parser("models", help="list the registered model adapters: default checkpoints, prompt "
                              "modes, tasks", description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--format", choices=("table", "json"), default="table", help="default: table")
    p.set_defaults(func=cmd_models)
