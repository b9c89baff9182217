"""The catalogue of the 100 RF100-VL datasets, shipped with the package.

Domains use the paper's seven names; the ``rf100vl`` package's own names (``Flora/Fauna``,
``Lab Imaging``, ``Misc``, ``Sport``) are accepted as aliases.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

from rf100vl_hf.errors import unknown

DOMAINS: tuple[str, ...] = (
    "Aerial",
    "Document",
    "Flora & Fauna",
    "Industrial",
    "Medical",
    "Sports",
    "Other",
)
CUSTOM_DOMAIN = "custom"
ALL = "All"
"""The name of the mean over every domain (the paper's "All" column)."""
SAMPLE_NAME = "sample"
"""The embedded sample export's dataset name (not a catalogue dataset)."""
SUBSETS: tuple[str, ...] = ("all", "rf20vl")
_DOMAIN_ALIASES = {
    "flora/fauna": "Flora & Fauna",
    "flora-fauna": "Flora & Fauna",
    "flora": "Flora & Fauna",
    "lab imaging": "Medical",
    "misc": "Other",
    "sport": "Sports",
}


@dataclass(frozen=True)
class CatalogEntry:
    basename: str  # the config name, and the folder name of an export on disk
    domain: str  # one of DOMAINS
    in_rf20vl: bool
    full_project: str  # Roboflow project slug of the full export
    fewshot_project: str  # Roboflow project slug of the few-shot export
    full_url: str
    fewshot_url: str


@cache
def entries() -> tuple[CatalogEntry, ...]:
    """All 100 datasets in catalogue order."""
    text = resources.files("rf100vl_hf").joinpath("data/rf100vl_datasets.csv").read_text("utf-8")
    return tuple(
        CatalogEntry(
            basename=row["basename"],
            domain=row["domain_paper"],
            in_rf20vl=row["in_rf20vl"] == "True",
            full_project=row["full_project_name"],
            fewshot_project=row["fsod_project_name"],
            full_url=row["full_universe_url_2025_04"],
            fewshot_url=row["fsod_universe_url_2025_04"],
        )
        for row in csv.DictReader(text.splitlines())
    )


@cache
def _by_name() -> dict[str, CatalogEntry]:
    return {e.basename: e for e in entries()}


def get(name: str) -> CatalogEntry:
    """The entry for a basename; also accepts a full or few-shot Roboflow project slug."""
    by_name = _by_name()
    if name in by_name:
        return by_name[name]
    for entry in entries():
        if name in (entry.full_project, entry.fewshot_project):
            return entry
    raise unknown("RF100-VL dataset", name, list(by_name))


def contains(name: str) -> bool:
    """Whether ``name`` is the basename of a catalogue dataset (project slugs are not)."""
    return name in _by_name()


def domain_spellings() -> dict[str, str]:
    """Every accepted spelling of a domain, lower-cased -> the paper's name (``custom`` too)."""
    return {**{d.lower(): d for d in DOMAINS}, **_DOMAIN_ALIASES, CUSTOM_DOMAIN: CUSTOM_DOMAIN}


def normalize_domain(domain: str) -> str:
    """The paper's name of a domain given any accepted spelling."""
    spelled = domain_spellings().get(domain.strip().lower())
    if spelled is None:
        raise unknown("domain", domain, list(DOMAINS))
    return spelled


DOMAIN_PREFIX = "domain:"


def selection(value: str) -> tuple[str, str | None] | None:
    """A group of catalogue datasets as ``--rf100vl-dataset`` and ``rf100vl-hf list`` name it:
    ``all`` or ``rf20vl`` (a subset), ``domain:NAME`` or ``rf20vl:domain:NAME`` (a domain, in a
    subset) -> (subset, the domain as written or ``None``); ``None`` for any other value (a
    dataset's name)."""
    subset, _, rest = value.strip().partition(":")
    if subset.lower() not in SUBSETS:
        subset, rest = "all", value.strip()
    if not rest:
        return subset.lower(), None
    return (subset.lower(), rest[len(DOMAIN_PREFIX):]) if rest.lower().startswith(DOMAIN_PREFIX) else None


def select(domain: str | None = None, subset: str = "all") -> list[CatalogEntry]:
    """Datasets of a domain and/or a subset (``all`` or ``rf20vl``), in catalogue order."""
    if subset not in SUBSETS:
        raise unknown("subset", subset, list(SUBSETS))
    wanted = normalize_domain(domain) if domain else None
    return [
        e
        for e in entries()
        if (wanted is None or e.domain == wanted) and (subset == "all" or e.in_rf20vl)
    ]
