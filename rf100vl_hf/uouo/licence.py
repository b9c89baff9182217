"""The licence of a cut-out source, as the Hub card needs it: never a fixed value.

Where it is read from, first found wins:

1. the manifest's ``"license"`` (a Hub licence id such as ``cc-by-4.0``, or a licence name);
2. a licence file at the source root (``LICENSE``, ``LICENSE.txt``, ``LICENSE.md``,
   ``COPYING``), recognised by its title;
3. a ``License: ...`` line of a README at the root (Roboflow exports carry one).

A recognised licence becomes its Hub id (:func:`rf100vl_hf.licences.hub_id`); a named one
the Hub does not list becomes ``other`` with its name; a source that says nothing is ``unknown``, and the card says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rf100vl_hf.errors import DataError, shown
from rf100vl_hf.licences import hub_id
from rf100vl_hf.safepaths import refuse_special

LICENCE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING")
README_GLOBS = ("README*.txt", "README*.md")
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Licence:
    """``id`` is a Hub licence id (``other`` or ``unknown`` when none fits); ``name`` what the
    source calls it; ``origin`` the file it was read from (empty when unknown)."""

    id: str = UNKNOWN
    name: str = ""
    origin: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "origin": self.origin}


def _from_text(text: str, origin: Path, name: str) -> Licence:
    return Licence(hub_id(text) or "other", name.strip(), origin.name)


def source_licence(root: Path, manifest_data: dict[str, Any], manifest: Path) -> Licence:
    """The licence of the source at ``root`` (see the module docstring)."""
    stated = manifest_data.get("license")
    if stated is not None:
        if not isinstance(stated, str) or not stated.strip():
            raise DataError(manifest, "license", f"must be a licence id or name, got {shown(stated)}")
        return _from_text(stated, manifest, stated)
    for filename in LICENCE_FILES:
        path = root / filename
        refuse_special(path, path, "file")  # a FIFO would block the read, and is no licence
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            title = next((line.strip() for line in text.splitlines() if line.strip()), "")
            return _from_text(text[:2000], path, title[:120])
    for pattern in README_GLOBS:
        for path in sorted(root.glob(pattern)):
            refuse_special(path, path, "file")
            match = re.search(r"^\s*licen[cs]e:\s*(.+)$", path.read_text(encoding="utf-8", errors="replace"),
                              re.IGNORECASE | re.MULTILINE)
            if match:
                return _from_text(match.group(1), path, match.group(1))
    return Licence()
