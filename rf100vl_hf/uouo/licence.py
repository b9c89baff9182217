"""The licence of a cut-out source, as the Hub card needs it: never a fixed value.

Where it is read from, first found wins:

1. the manifest's ``"license"`` (a Hub licence id such as ``cc-by-4.0``, or a licence name);
2. a licence file at the source root (``LICENSE``, ``LICENSE.txt``, ``LICENSE.md``,
   ``COPYING``), recognised by its title;
3. a ``License: ...`` line of a README at the root (Roboflow exports carry one).

A recognised licence becomes its Hub id (:func:`rf100vl_hf.licences.hub_id`); a named one
the Hub does not list becomes ``other`` with its name; a source that says nothing is ``unknown``, and the card says so.

The manifest's ``"license_note"`` is a restriction beside the licence that the card repeats: a
curated source (``rf100vl-hf uouo curate``) whose cut-outs a non-commercial remover made says so there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
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
    source calls it; ``origin`` the file it was read from (empty when unknown); ``note`` the
    manifest's restriction beside it (empty when none)."""

    id: str = UNKNOWN
    name: str = ""
    origin: str = ""
    note: str = ""

    def as_dict(self) -> dict[str, str]:
        found = {"id": self.id, "name": self.name, "origin": self.origin}
        return {**found, "note": self.note} if self.note else found


def _from_text(text: str, origin: Path, name: str) -> Licence:
    return Licence(hub_id(text) or "other", name.strip(), origin.name)


def source_licence(root: Path, manifest_data: dict[str, Any], manifest: Path) -> Licence:
    """The licence of the source at ``root``, with the manifest's note (see the module docstring)."""
    note = manifest_data.get("license_note", "")
    if not isinstance(note, str):
        raise DataError(manifest, "license_note", f"must be a string, got {shown(note)}")
    found = _stated_licence(root, manifest_data, manifest)
    return replace(found, note=note.strip()) if note.strip() else found


def _stated_licence(root: Path, manifest_data: dict[str, Any], manifest: Path) -> Licence:
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
