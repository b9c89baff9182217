"""Which Hub licence id a licence's name or text means: one mapping for both dataset cards.

An RF100-VL export states its licence on a ``License:`` line of its README; a UOUO cut-out
source in its manifest, a licence file or a README line. Either way :func:`hub_id` turns
what is stated into the id the Hub's card metadata takes, or ``None`` when no id fits.
"""

from __future__ import annotations

import re
from functools import cache

HUB_LICENSES = (
    "apache-2.0", "mit", "cc0-1.0", "pddl", "odbl", "odc-by", "unlicense", "bsd-3-clause", "gpl-3.0", "agpl-3.0",
    "cc-by-2.0", "cc-by-2.5", "cc-by-3.0", "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0",
    "cc-by-nc-3.0", "cc-by-nc-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-3.0", "cc-by-nc-nd-4.0", "cc-by-nc-sa-2.0",
    "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0",
)
"""Hub licence ids (SPDX-based) that a stated licence name can match exactly."""
_ALIASES = {"odblv10": "odbl", "odbl10": "odbl"}
"""Spellings of a licence that normalise to no id's key (Roboflow writes ``ODbL v1.0``)."""
_IN_TEXT: tuple[tuple[str, str], ...] = (
    # (pattern over the lower-cased, space-normalised text, Hub licence id); most specific first
    (r"attribution[- ]noncommercial[- ]sharealike 4\.0|cc[- ]by[- ]nc[- ]sa[- ]4\.0", "cc-by-nc-sa-4.0"),
    (r"attribution[- ]noncommercial 4\.0|cc[- ]by[- ]nc[- ]4\.0", "cc-by-nc-4.0"),
    (r"attribution[- ]sharealike 4\.0|cc[- ]by[- ]sa[- ]4\.0", "cc-by-sa-4.0"),
    (r"attribution 4\.0|cc[- ]by[- ]4\.0", "cc-by-4.0"),
    (r"cc0|public domain dedication", "cc0-1.0"),
    (r"apache license,? version 2\.0|apache[- ]2\.0", "apache-2.0"),
    (r"\bmit license\b|^mit$", "mit"),
    (r"open database license|\bodbl\b", "odbl"),
)
"""What identifies a licence inside a longer text (the opening of a licence file)."""


def _key(text: str) -> str:
    """A licence name without case, punctuation, the word licence or a ``CC`` before ``BY``:
    ``CC BY-NC 4.0``, ``BY-NC 4.0`` and ``cc-by-nc-4.0`` are one key."""
    key = re.sub(r"[^0-9a-z]+", "", re.sub(r"licen[cs]e", "", text.casefold()))
    return key[2:] if key.startswith("ccby") else key


@cache
def _ids_by_key() -> dict[str, str]:
    return {**{_key(i): i for i in HUB_LICENSES}, **_ALIASES}


def hub_id(text: str) -> str | None:
    """The Hub licence id ``text`` names (as a whole, in any spelling) or contains, or ``None``."""
    known = _ids_by_key().get(_key(text))
    if known:
        return known
    normal = " ".join(text.lower().split())
    return next((licence for pattern, licence in _IN_TEXT if re.search(pattern, normal)), None)
