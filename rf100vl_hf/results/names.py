"""Short display names of models for tables, figures and summaries.

A row keeps the full spec it was run with (``spec``: ``predictions:/runs/2025-05/oracle``,
``owlv2:/models/owlv2-finetuned``), but a column headed by a machine's path is wide and
tells a reader little. Tables and figures show instead:

- a replay, ``predictions:PATH``, as ``replay(NAME)``, NAME the file or folder replayed;
- a checkpoint given as a local path, ``ADAPTER:PATH``, as ``ADAPTER(NAME)``;
- anything else (``owlv2``, ``owlv2:google/owlv2-base-patch16``) as it is.

Two specs that would get the same short name (two replays of folders both called
``oracle``) keep their full specs, so two models never share a column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PureWindowsPath

from rf100vl_hf.specs import ModelSpec

REPLAY = "predictions"
"""The adapter name of replayed predictions files."""
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def _is_path(text: str) -> bool:
    """Whether a checkpoint is a path of the machine rather than a Hub id (``org/name``)."""
    return (text.startswith(("/", "~", "./", "../", "\\")) or text.count("/") > 1 or "\\" in text
            or _WINDOWS_DRIVE.match(text) is not None)


def _last_part(path: str) -> str:
    """The last part of a path (of either system's separators), without a ``.json`` suffix."""
    name = PureWindowsPath(path.rstrip("/\\")).name
    return name.removesuffix(".json") or path


def short_name(spec: ModelSpec) -> str:
    """The display name of one spec (see the module docstring)."""
    if spec.name == REPLAY and spec.checkpoint:
        return f"replay({_last_part(spec.checkpoint)})"
    if spec.checkpoint and _is_path(spec.checkpoint):
        return f"{spec.name}({_last_part(spec.checkpoint)})"
    return spec.text


def display_names(specs: Iterable[str]) -> dict[str, str]:
    """Spec -> display name for every spec given; specs whose short names collide keep their full spec."""
    unique = list(dict.fromkeys(specs))
    short = {spec: short_name(ModelSpec.parse(spec)) for spec in unique}
    taken: dict[str, int] = {}
    for name in short.values():
        taken[name] = taken.get(name, 0) + 1
    return {spec: name if taken[name] == 1 and (name == spec or name not in unique) else spec
            for spec, name in short.items()}
