"""A model spec, ``NAME[:CHECKPOINT_OR_PATH]``: how a run names a model (on the command line,
in a config file, in a row's ``spec`` column), parsed once into its parts and passed on typed.

Only the first colon separates, so a path (``predictions:C:\\runs\\preds.json``) or a Hub id
(``owlv2:google/owlv2-base-patch16``) passes whole. The spec's text is what ids, rows,
thresholds and folders name a model by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelSpec:
    """A model as asked for, and the adapter options given for it (``()`` where none were, or
    where the spec was read back from a row)."""

    text: str
    name: str
    checkpoint: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """The one place a spec is split (see the module docstring)."""
        name, _, checkpoint = text.partition(":")
        return cls(text.strip(), name.strip(), checkpoint.strip() or None)

    def with_options(self, options: Mapping[str, str]) -> ModelSpec:
        return replace(self, options=tuple(options.items()))

    @property
    def option_values(self) -> dict[str, str]:
        return dict(self.options)

    def __str__(self) -> str:
        return self.text
